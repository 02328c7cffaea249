"""The calibration set of the case being run: ``verify(model, x, quant="int8", calibration=...)``.

A quantizing mode calibrates on the case's own inputs unless the case brings a calibration set;
the ``verify`` fixture sets it around the case (a context variable: the back ends' ``execute``
takes no such argument, and cases run concurrently in threads each see their own). Holds the
batches as given; imports no torch.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Sequence

from mluverify.core.backends import Backend
from mluverify.core.case import Case
from mluverify.errors import InvalidArgument, Unsupported

_CALIBRATION: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("mluverify_calibration", default=())


@contextlib.contextmanager
def calibrating_on(batches: Sequence[Any] | None, case: Case, backend: Backend) -> Iterator[tuple[Any, ...]]:
    """``case`` run inside the block calibrates on ``batches`` (each a tensor or a tuple of
    positional arguments); ``None`` or empty: on its own inputs. A set needs a quantization
    (else InvalidArgument); a quantizing mode of ``backend`` that calibrates otherwise skips the
    case (Unsupported) rather than calibrate on other data than it says (a mode that quantizes
    nothing refuses the quantization itself)."""
    chosen = checked_batches(batches, quant=case.quant)
    if chosen and case.mode in backend.quantizing_modes and case.mode not in backend.calibrating_modes:
        takers = ", ".join(f"{backend.name}:{mode}" for mode in backend.calibrating_modes) or "none"
        raise Unsupported(f"{case.target} calibrates on the case's own inputs and takes no calibration= set "
                          f"(the modes of {backend.name} that do: {takers})")
    token = _CALIBRATION.set(chosen)
    try:
        yield chosen
    finally:
        _CALIBRATION.reset(token)


def checked_batches(batches: Sequence[Any] | None, *, quant: str) -> tuple[Any, ...]:
    """``batches`` as a tuple; InvalidArgument for a set without a quantization or a lone
    tensor (which would be read as one batch per row)."""
    if hasattr(batches, "shape"):
        raise InvalidArgument(f"calibration= takes a sequence of batches, got one {type(batches).__name__} of shape "
                              f"{tuple(batches.shape)}: give [x] for one batch or a list of batches")
    if batches is None or len(batches) == 0:
        return ()
    if not quant:
        raise InvalidArgument("calibration= calibrates a quantization, and the case asks for none: "
                              "give quant='int8' (or 'int16'), or drop calibration=")
    return tuple(batches)


def current_calibration() -> tuple[Any, ...]:
    """The calibration set of the case being run; ``()``: calibrate on its own inputs."""
    return _CALIBRATION.get()


__all__ = ["calibrating_on", "checked_batches", "current_calibration"]
