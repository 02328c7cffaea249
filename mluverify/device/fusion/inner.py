"""Values inside a fusion group, each beside the same value of the group's graph on the CPU.

A fused engine hands back only its outputs, so an error that a later op of the same group damps
(a matmul 3 % off whose scores go through a softmax in the same group) does not show in them.
``run_beside_reference`` runs the engine node by node and, beside each node, the node's own ATen
op on the reference values: the group's graph (as lowered to device ops) on the CPU in float32,
without the device's kernels or its storage rounding. It keeps the intermediate furthest from its
reference (Cambricon's rel_mse, the policies' metric), so the target can judge it.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import fx

from mluverify.device.fusion import numerics
from mluverify.device.fusion.settings import op_name


@dataclass(frozen=True)
class InnerValue:
    """One value computed inside a fusion group: the engine's node name and ATen op, the fused
    value and the group's graph's value on the CPU in float32 (copies), and their rel_mse
    (``inf`` where their NaN / Inf positions or shapes differ)."""

    node: str
    op: str
    fused: torch.Tensor
    reference: torch.Tensor
    rel_mse: float


@dataclass(frozen=True)
class BesideReference:
    """A group engine's outputs, its worst inner value (None when it computed no floating
    value) and, when the reference could not be run, why (``unjudged``)."""

    outputs: Any
    worst: InnerValue | None
    unjudged: str = ""


def run_beside_reference(engine: fx.GraphModule, inputs: list) -> BesideReference:
    """Run ``engine`` on ``inputs`` (its outputs are the engine's own, bit for bit) beside its
    graph on the CPU in float32. A reference op that raises leaves the group unjudged, with the
    reason: recording never changes how the group runs."""
    interpreter = _Beside(engine)
    outputs = interpreter.run(*inputs)
    return BesideReference(outputs, interpreter.worst, interpreter.unjudged)


# The storage-precision passes' conversions: the reference keeps float32 throughout.
_STORAGE_CONVERSIONS = (numerics.round_to, numerics.cast_floating)


class _Beside(fx.Interpreter):
    """An ``fx.Interpreter`` of the engine that also computes every node on the reference side
    (``reference_env``, freed as the engine's values are) and judges each floating value as soon
    as it is computed, before a later in-place op can overwrite it."""

    def __init__(self, engine: fx.GraphModule) -> None:
        super().__init__(engine)
        self.reference_env: dict[fx.Node, Any] = {}
        self.worst: InnerValue | None = None
        self.unjudged = ""

    def run_node(self, node: fx.Node) -> Any:
        value = super().run_node(node)
        if not self.unjudged:
            try:
                self.reference_env[node] = self._reference(node, value)
            except Exception as exc:  # noqa: BLE001 - any failure of the reference, reported, not raised
                self.unjudged = f"{node.format_node()}: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
                self.reference_env.clear()
            else:
                self._consider(node, value, self.reference_env[node])
        for dead in self.user_to_last_uses.get(node, ()):
            self.reference_env.pop(dead, None)
        return value

    def _reference(self, node: fx.Node, value: Any) -> Any:
        if node.op == "placeholder":
            return numerics.cast_floating(value, torch.float32)
        if node.op == "get_attr":
            return value  # the group's constants, as the engine reads them
        if node.op == "output":
            return None
        if node.op != "call_function":
            raise NotImplementedError(f"no reference for a {node.op} node")
        if node.target in _STORAGE_CONVERSIONS:
            return self.reference_env[node.args[0]]
        target = node.meta.get(numerics.ATEN_OP, node.target)
        if not isinstance(target, torch._ops.OpOverload) and target is not operator.getitem:
            # a device kernel the passes did not note the ATen op of: it must not judge itself
            raise NotImplementedError(f"no ATen op known for {op_name(target)}")
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), self.reference_env.__getitem__)
        # float32 throughout, as the group's graph on the CPU runs (a cast the model writes rounds)
        return numerics.cast_floating(target(*args, **kwargs), torch.float32)

    def _consider(self, node: fx.Node, fused: Any, reference: Any) -> None:
        """Keep ``node``'s value (copies) when it is the furthest from its reference so far."""
        computed = node.meta.get(numerics.ATEN_OP, node.target)
        if (node.op != "call_function" or node.target in _STORAGE_CONVERSIONS
                or (computed in numerics.VALUE_PRESERVING and computed is not operator.getitem)
                or not isinstance(fused, torch.Tensor) or not fused.is_floating_point()):
            return  # a value moved, not computed (a tuple's element is the op's result), is judged where computed
        error = _rel_mse(fused, reference)
        if self.worst is None or error > self.worst.rel_mse:
            self.worst = InnerValue(node.name, _computing_op(node), fused.detach().clone(), reference.detach().clone(), error)


def _computing_op(node: fx.Node) -> str:
    """The ATen op that computed ``node``'s value (a tuple element's: the op returning the tuple)."""
    if node.target is operator.getitem:
        node = node.args[0]
    return op_name(node.meta.get(numerics.ATEN_OP, node.target))


def _rel_mse(fused: torch.Tensor, reference: Any) -> float:
    """The judge's rel_mse of the pair over their finite positions; ``inf`` where no
    value-for-value comparison holds (another shape, NaN / Inf at other positions). In numpy:
    one thread, no OpenMP hand-offs for each of a network's many small values."""
    from mluverify.judge import rel_mse

    if not isinstance(reference, torch.Tensor) or reference.shape != fused.shape:
        return math.inf
    actual = fused.detach().reshape(-1).numpy().astype(np.float64)
    expected = reference.detach().reshape(-1).numpy().astype(np.float64)
    finite = np.isfinite(actual)
    if not (finite.all() and np.isfinite(expected).all()):  # rare: non-finite values must sit alike
        if not np.array_equal(actual[~finite], expected[~finite], equal_nan=True) or not np.isfinite(expected[finite]).all():
            return math.inf
        actual, expected = actual[finite], expected[finite]
    return rel_mse(actual, expected)
