"""CPU fallbacks: every op that ran on the CPU instead of a device kernel, counted and logged.

``track_fallbacks()`` collects the fallbacks made while a block of code runs (trackers nest:
every open tracker sees every fallback). Trackers are process-wide, not per thread, because
autograd runs a device's backward ops on its own worker thread. ``fallback_counts()`` holds
the process totals. The first fallback of each op is logged at WARNING, later ones at DEBUG
(``TORCH_MIN_CNLOG_LEVEL``).
"""
from __future__ import annotations

import collections
import contextlib
import threading
from typing import Iterator

from mluverify.device._log import logger


class FallbackTracker:
    """The fallbacks seen while a ``track_fallbacks()`` block was open.

    ``ops``: op names in the order first seen; ``counts``: op name -> number of calls.
    """

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __repr__(self) -> str:
        return f"FallbackTracker(counts={dict(self.counts)!r})"


_totals: collections.Counter[str] = collections.Counter()
_trackers: list[FallbackTracker] = []
_lock = threading.Lock()


def record(op_name: str, reason: str) -> None:
    """Count one CPU fallback of ``op_name`` and log it."""
    with _lock:
        first = op_name not in _totals
        _totals[op_name] += 1
        for tracker in _trackers:
            tracker.counts[op_name] += 1
    if first:
        logger.warning("%s runs on the CPU (%s); further calls are logged at DEBUG", op_name, reason)
    else:
        logger.debug("%s runs on the CPU (%s)", op_name, reason)


@contextlib.contextmanager
def track_fallbacks() -> Iterator[FallbackTracker]:
    """Collect the CPU fallbacks made while the ``with`` block runs (in any thread)."""
    tracker = FallbackTracker()
    with _lock:
        _trackers.append(tracker)
    try:
        yield tracker
    finally:
        with _lock:
            _trackers.remove(tracker)


def fallback_counts() -> dict[str, int]:
    """Process-wide fallback counts, op name -> calls."""
    return dict(_totals)
