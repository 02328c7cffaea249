"""Which fused calls ran while a block of code ran: ``track_fused_calls()``.

For tools that judge results of code they did not run themselves (``mluverify.testing``: a seed
script calls its own ``torch.jit`` module on the device), so that they can say whether the
result came from a fused program. Every ``FusionRuntime`` call (``fuse``, a ``torch.jit`` module
called on the device, ``torch.compile(backend="mlu")``) reports its summary to the open blocks of
its context. Imports no compiler.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator

_OPEN: contextvars.ContextVar[tuple[list, ...]] = contextvars.ContextVar("mluverify_fused_calls", default=())


@contextlib.contextmanager
def track_fused_calls() -> Iterator[list]:
    """Collect the ``FusionSummary`` of every fused call made in this block (blocks nest: each
    sees every call), in order."""
    calls: list = []
    token = _OPEN.set((*_OPEN.get(), calls))
    try:
        yield calls
    finally:
        _OPEN.reset(token)


def note_call(summary: Callable[[], Any]) -> None:
    """A fused call ended: hand its summary (computed only when a block is open) to the blocks."""
    open_blocks = _OPEN.get()
    if open_blocks:
        made = summary()
        for calls in open_blocks:
            calls.append(made)
