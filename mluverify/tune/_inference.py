"""Inference trials: a float model quantized per layer (``quantize_dynamic_mlu`` with qconfig
``layers``), run on ``mlu`` fused (``mlu:cnml``) with ``DEBUG_FORCED_FALLBACK_OPS``, or layer by
layer (``mlu:cnnl``), judged against the float model on the CPU: by rel_mse, or by a task metric
(``Task``: accuracy or top-1 agreement over the samples, the task gate's threshold)."""
from __future__ import annotations

import contextlib
import copy
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import torch
import torch.nn as nn

from mluverify.core.task import Task
from mluverify.device.quantization import default_mapping, quantize_dynamic_mlu
from mluverify.errors import InvalidArgument
from mluverify.tune._objective import Objective
from mluverify.tune._search import Config, Knob, Outcome

PRECISION_LADDER = ("int8", "int16", "float")
FUSION_LADDER = ("fused", "cnnl")
MODES = ("fused", "layer")
FALLBACK_ENV = "DEBUG_FORCED_FALLBACK_OPS"
# Ops that carry quantized layers or only move data: forcing them out of a group changes no
# arithmetic the precision ladder does not already cover.
_QUANTIZED_OPS = "mluverify::"
_NOT_FUSION_KNOBS = frozenset({"aten::view", "aten::reshape", "aten::permute", "aten::transpose",
                     "aten::t", "aten::clone", "aten::alias", "aten::expand", "aten::slice", "aten::select",
                     "aten::unsqueeze", "aten::squeeze", "aten::split", "aten::_unsafe_view",
                     "aten::detach", "aten::contiguous", "aten::copy"})


def is_fusion_knob(op: str) -> bool:
    """Whether forcing ``op`` out of its group can change the arithmetic."""
    return not op.startswith(_QUANTIZED_OPS) and op.partition(".")[0] not in _NOT_FUSION_KNOBS


def as_args(inputs: Any) -> tuple:
    """A batch as positional arguments: a tuple stays, anything else is one argument."""
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _to(device: str, args: tuple) -> tuple:
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


@contextlib.contextmanager
def forced_fallback(ops: Sequence[str]) -> Iterator[None]:
    """``DEBUG_FORCED_FALLBACK_OPS`` set to ``ops`` while the block runs (the seeds' switch is an
    environment variable, read by the fused runtime at each call), restored after."""
    previous = os.environ.get(FALLBACK_ENV)
    os.environ[FALLBACK_ENV] = ",".join(ops)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(FALLBACK_ENV, None)
        else:
            os.environ[FALLBACK_ENV] = previous


@dataclass(frozen=True)
class Deployment:
    """One setting in the seeds' terms: per-layer dtypes for qconfig ``layers`` (``None``:
    float) and the ops for ``DEBUG_FORCED_FALLBACK_OPS``."""

    layers: Mapping[str, str | None] = field(default_factory=dict)
    fallback_ops: tuple[str, ...] = ()

    @classmethod
    def from_changes(cls, changes: Mapping[str, str]) -> "Deployment":
        """From a search's changes (``layer:NAME`` -> dtype, ``op:NAME`` -> ``cnnl``)."""
        layers, ops = {}, []
        for key, rung in changes.items():
            kind, _, name = key.partition(":")
            if kind == "layer":
                layers[name] = None if rung == "float" else rung
            elif rung != "fused":
                ops.append(name)
        return cls(layers, tuple(sorted(ops)))


def deploy(model: nn.Module, calibration: Sequence[Any], deployment: Deployment, dtype: str = "int8",
           ) -> nn.Module:
    """The seeds' two steps with per-layer settings: calibrate a ``gen_quant=True`` copy on the
    CPU, load its checkpoint into a fresh ``quantize_dynamic_mlu`` model (still on the CPU)."""
    qconfig = {"layers": dict(deployment.layers), "iteration": len(calibration)}
    calibrating = quantize_dynamic_mlu(model, qconfig, dtype=dtype, gen_quant=True)
    with torch.no_grad():
        for batch in calibration:
            calibrating(*as_args(batch))
    runnable = quantize_dynamic_mlu(model, {"layers": dict(deployment.layers)}, dtype=dtype)
    runnable.load_state_dict(calibrating.state_dict())
    return runnable.eval()


def run_on_device(model: nn.Module, args: tuple, mode: str, fallback_ops: Sequence[str]) -> Any:
    """``model`` on ``mlu``: fused (``fuse``, under the forced fallbacks) or layer by layer."""
    from mluverify.device import fuse, kernel_mode

    model = model.to("mlu")
    inputs = _to("mlu", args)
    with torch.no_grad():
        if mode == "layer":
            with kernel_mode("cnnl"):
                output = model(*inputs)
        else:
            with forced_fallback(fallback_ops):
                output = fuse(model, inputs)(*inputs)
    return _to_cpu(output)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to("cpu")
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cpu(v) for v in value)
    return value


class InferenceProblem:
    """A float model, its calibration batches and the batch it is judged on, deployed in
    ``dtype`` on ``mlu`` in ``mode`` (``fused``: the ``mlu:cnml`` target; ``layer``:
    ``mlu:cnnl``), judged by its ``objective`` (rel_mse within ``bound``, or a ``task``'s gate
    on the batch's samples; ``bound`` still judges the attribution's rel_mse)."""

    def __init__(self, model: nn.Module, calibration: Sequence[Any], inputs: Any, *, bound: float,
                 dtype: str = "int8", mode: str = "fused", task: Task | None = None) -> None:
        if mode not in MODES:
            raise InvalidArgument(f"unknown tuning mode {mode!r}; valid: {', '.join(MODES)}")
        if not calibration:
            raise InvalidArgument("tuning needs at least one calibration batch")
        self.model = copy.deepcopy(model).eval()
        self.calibration = list(calibration)
        self.args = as_args(inputs)
        self.bound = bound
        self.dtype = dtype
        self.mode = mode
        with torch.no_grad():
            self.reference = self.model(*self.args)
        self.objective = Objective(self.reference, bound, task)
        self.task = task

    def layer_names(self) -> list[str]:
        """The quantizable layers, in module order."""
        mapping = default_mapping()
        return [name for name, module in self.model.named_modules() if type(module) in mapping]

    def fused_ops(self) -> list[str]:
        """The ops that fuse in the deployed model, in first-seen order (none layer by layer)."""
        if self.mode != "fused":
            return []
        from mluverify.device import fuse

        with torch.no_grad(), forced_fallback(()):
            fused = fuse(deploy(self.model, self.calibration, Deployment(), self.dtype).to("mlu"),
                         _to("mlu", self.args))
            fused(*_to("mlu", self.args))
        ops = [op for group in fused.runtime.summary().groups for op in group.ops]
        return [op for op in dict.fromkeys(ops) if is_fusion_knob(op)]

    def knobs(self) -> list[Knob]:
        layers = [Knob("layer", name, PRECISION_LADDER) for name in self.layer_names()]
        return layers + [Knob("op", op, FUSION_LADDER) for op in self.fused_ops()]

    def changes(self, config: Config, knobs: Mapping[str, Knob]) -> dict[str, str]:
        return {key: knobs[key].ladder[rung] for key, rung in config.items() if rung > 0}

    def outcome(self, deployment: Deployment) -> Outcome:
        """Deploy, run on the device, judge against the CPU float model."""
        runnable = deploy(self.model, self.calibration, deployment, self.dtype)
        return self.objective.judge(run_on_device(runnable, self.args, self.mode, deployment.fallback_ops))
