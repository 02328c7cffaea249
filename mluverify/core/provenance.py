"""Which ATen ops are "the op under test" of a case, and whether one of them ran on the CPU.

The device reports the ATen ops that fell back to the CPU (``aten::_softmax.out``,
``aten::convolution_overrideable``); the pipeline knows what the case computes from what its
callable dispatched on the CPU reference run (``run_recording``), not from the case's name:

1. ``Case.aten_ops`` (``verify(..., aten_ops=("aten::clamp.Tensor",))``) when the case
   declares them: exactly those overloads (or every overload of a bare ``aten::clamp``);
2. else the reference run (``Dispatched``): a callable that dispatched one computing ATen op
   (views, copies and factories aside: ``PLUMBING``) is a *single-op case*. Every fallback of
   such a case that is not plumbing computed that op (the device runs nothing else, though it
   may name the op's own decomposition, ``convolution_overrideable`` for ``convolution``), so it
   is under test whatever the case is called (``op="special_bessel_j0"``). A callable that
   dispatched only plumbing tests that plumbing. One that dispatched several computing ops is a
   *network* (``resnet50``, ``cross_entropy``): no op is under test, its fallbacks are
   provenance (the record's ``fallback_ops``), not a verdict.

For a gradient the pipeline also records the reference's backward: a fallback of an op that
only the backward dispatched concerns the gradients of a single-op case, not its output.
torch is imported only when a case runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from mluverify.core.case import Case

# Ops that move, copy or create data rather than compute the case (views are told by
# ``OpOverload.is_view``): they never make a case a network.
PLUMBING = frozenset(f"aten::{name}" for name in (
    "copy_", "_to_copy", "clone", "contiguous", "detach", "lift_fresh", "lift_fresh_copy", "alias",
    "_local_scalar_dense", "resolve_conj", "resolve_neg", "_copy_from", "_copy_from_and_resize",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor",
    "arange", "fill_", "zero_", "randn", "rand", "randint", "normal_", "uniform_",
))


@dataclass(frozen=True)
class Dispatched:
    """The ATen ops (``aten::name``, no overload) a case's CPU reference dispatched: the ops that
    compute, the plumbing (``PLUMBING`` and views), and the computing ops only its backward
    (and optimizer step) dispatched."""

    computing: frozenset[str] = frozenset()
    plumbing: frozenset[str] = frozenset()
    backward: frozenset[str] = frozenset()

    def with_backward(self, whole: "Dispatched") -> "Dispatched":
        """These forward ops, with what the ``whole`` run (forward and backward) added."""
        return Dispatched(self.computing, self.plumbing | whole.plumbing, whole.computing - self.computing)

    def computes(self, aten_op: str, *, gradient: bool = False) -> bool:
        """Whether the fallback ``aten_op`` computed the op under test (of the output, or with
        ``gradient`` of a gradient)."""
        name = overload_free(aten_op)
        if name in PLUMBING or name in self.plumbing or is_view(aten_op):
            return not self.computing and name in self.plumbing  # a case of plumbing only tests it
        if len(self.computing) != 1:  # a network: provenance only
            return False
        return gradient or ("_backward" not in name and name not in self.backward)


def run_recording(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, Dispatched]:
    """``fn(*args, **kwargs)`` and the ATen ops it dispatched (forward and any backward it runs)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    computing: set[str] = set()
    plumbing: set[str] = set()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            (plumbing if func.is_view or name in PLUMBING else computing).add(name)
            return func(*args, **(kwargs or {}))

    with Recorder():
        result = fn(*args, **kwargs)
    return result, Dispatched(frozenset(computing), frozenset(plumbing))


def is_view(aten_op: str) -> bool:
    """Whether ``aten_op`` (``aten::expand``, ``aten::view.dtype``) is a view op (unknown: no)."""
    import torch

    namespace, _, rest = aten_op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default").is_view
    except (AttributeError, RuntimeError):
        return False


def is_declared(case: Case, aten_op: str) -> bool:
    """Whether ``aten_op`` (a fallback's name, ``aten::clamp.Tensor``) is one of the case's
    declared ``aten_ops`` (a bare name stands for every overload)."""
    return any(aten_op == declared or ("." not in declared.rpartition("::")[2]
                                       and overload_free(aten_op) == declared)
               for declared in case.aten_ops)


def overload_free(aten_op: str) -> str:
    """``"aten::clamp.Tensor"`` -> ``"aten::clamp"``."""
    return aten_op.partition(".")[0]


def ops_under_test_on_cpu(case: Case, fallback_ops: Iterable[str], dispatched: Dispatched | None, *,
                          gradient: bool = False) -> tuple[str, ...]:
    """The fallback ops (in order) that computed the op under test on the CPU: the declared
    ``aten_ops``, else by what the reference ``dispatched`` (None, unknown: none)."""
    if case.aten_ops:
        return tuple(op for op in fallback_ops if is_declared(case, op))
    if dispatched is None:
        return ()
    return tuple(op for op in fallback_ops if dispatched.computes(op, gradient=gradient))
