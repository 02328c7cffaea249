"""What is being verified: a target (``backend:mode``) and a case on it."""
from __future__ import annotations

from dataclasses import dataclass

from mluverify.errors import InvalidArgument


@dataclass(frozen=True)
class Target:
    """Where a case runs: a back end and one of its execution modes, e.g. ``mlu:cnnl``."""

    backend: str
    mode: str

    @classmethod
    def parse(cls, text: str) -> "Target":
        """Parse ``"backend:mode"``; raises InvalidArgument naming the malformed text."""
        backend, sep, mode = text.partition(":")
        if not (backend and sep and mode) or ":" in mode:
            raise InvalidArgument(
                f"target {text!r} is not of the form 'backend:mode' (for example 'mlu:cnnl')"
            )
        return cls(backend, mode)

    def __str__(self) -> str:
        return f"{self.backend}:{self.mode}"


@dataclass(frozen=True)
class Case:
    """One comparison to make: the op, where it runs and in which precision.

    ``dtype`` is the precision the device computes in (the CPU reference stays float32);
    ``quant`` is ``""``, ``"int8"`` or ``"int16"``. ``core_version`` is the device variant the
    back end runs the case on (for the MLU its core version, ``"MLU270"``; ``""`` the back
    end's default). ``aten_ops`` names the ATen ops that implement the op under test
    (``"aten::clamp.Tensor"``; empty: learnt from what the case's callable dispatched on the CPU,
    see ``mluverify.core.provenance``).
    """

    case_id: str
    op: str
    target: Target
    suite: str = ""
    dtype: str = "float32"
    quant: str = ""
    shape: str = ""
    seed: int | None = None
    reproducer: str = ""
    core_version: str = ""
    aten_ops: tuple[str, ...] = ()

    @property
    def mode(self) -> str:
        return self.target.mode

    @property
    def backend(self) -> str:
        return self.target.backend
