"""CPU fallbacks: every op that ran on the CPU instead of a device kernel, counted and logged,
and the rule that decides when an op may fall back.

Two rules (``[tool.mluverify] fallback``, ``MLUVERIFY_FALLBACK``, ``fallback_rule()``):

* ``"cpu"`` (the default): an op with no MLU kernel runs on the CPU, counted; a kernel that
  fails raises. The suites verify every op torch has, most of which the emulated MLU has no
  kernel for: this rule lets them run and reports each as ``not_on_device``.
* ``"seed"`` (seed 003): an op not declared for the MLU (no kernel) stops the program with an
  error naming it (``NotDeclaredError``); a declared op whose kernel fails at run time copies
  its inputs to the CPU, runs there and copies the result back, recorded with the reason.

``track_fallbacks()`` collects the fallbacks made while a block of code runs (trackers nest:
every open tracker sees every fallback). Trackers are process-wide, not per thread, because
autograd runs a device's backward ops on its own worker thread. ``fallback_counts()`` holds
the process totals. The first fallback of each op is logged at WARNING, later ones at DEBUG
(``TORCH_MIN_CNLOG_LEVEL``).
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import threading
from typing import Iterator

from mluverify.device import _config
from mluverify.device._contextvars import block
from mluverify.device._log import logger
from mluverify.device_keys import FALLBACK_RULES
from mluverify.errors import MluverifyError, valid_choice

CPU, SEED = FALLBACK_RULES


class NotDeclaredError(MluverifyError, NotImplementedError):
    """Under the ``seed`` fallback rule: an op the MLU has no kernel for was called on the MLU."""


class FallbackTracker:
    """The fallbacks seen while a ``track_fallbacks()`` block was open.

    ``ops``: op names in the order first seen; ``counts``: op name -> number of calls;
    ``reasons``: op name -> the distinct reasons it ran on the CPU, in the order first seen.
    """

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.reasons: dict[str, list[str]] = {}

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(self.counts)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, op_name: str, reason: str) -> None:
        self.counts[op_name] += 1
        reasons = self.reasons.setdefault(op_name, [])
        if reason not in reasons:
            reasons.append(reason)

    def __repr__(self) -> str:
        return f"FallbackTracker(counts={dict(self.counts)!r})"


class _Rule:
    """The rule outside any ``fallback_rule()`` block (process-wide, so autograd's device
    thread sees it too); read from the settings when the device is imported."""

    default: str = _config.fallback_rule()


_RULE: contextvars.ContextVar[str | None] = contextvars.ContextVar("mluverify_fallback_rule", default=None)
_totals: collections.Counter[str] = collections.Counter()
_trackers: list[FallbackTracker] = []
_lock = threading.Lock()


def _checked(rule: str) -> str:
    if rule not in FALLBACK_RULES:
        raise valid_choice("fallback rule", rule, FALLBACK_RULES)
    return rule


def active_rule() -> str:
    """The fallback rule in force here: ``"cpu"`` or ``"seed"``."""
    return _RULE.get() or _Rule.default


def set_fallback_rule(rule: str) -> None:
    """Make ``rule`` the process default (what code outside ``fallback_rule()`` blocks gets)."""
    _Rule.default = _checked(rule)


def fallback_rule(rule: str) -> contextlib.AbstractContextManager[str]:
    """``with fallback_rule("seed"):`` runs the block (and the queued ops it issues) under ``rule``."""
    return block(_RULE, _checked(rule))


def not_declared(op_name: str) -> NotDeclaredError:
    return NotDeclaredError(
        f"{op_name} cannot be dispatched to the MLU: it is not declared for the MLU (no kernel is "
        f"registered through mluverify_device_kernels) and the fallback rule is 'seed'; register a "
        f"kernel, or use fallback = 'cpu' to run undeclared ops on the CPU")


def record(op_name: str, reason: str) -> None:
    """Count one CPU fallback of ``op_name`` and log it with its reason."""
    with _lock:
        first = op_name not in _totals
        _totals[op_name] += 1
        for tracker in _trackers:
            tracker.add(op_name, reason)
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
