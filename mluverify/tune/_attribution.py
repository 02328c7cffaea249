"""Which knobs to try first: each layer's and each op's **own** error, not the error it inherits.

* A layer's own quantization error: the quantized layer run on ``mlu`` on the very input the
  float layer saw on the CPU, against the float layer's output (rel_mse, as ``layer_errors``
  scores a layer, but without the error accumulated upstream).
* An op's own fused-mode error: the deployed model run op by op on ``mlu`` with every op on its
  fused-mode (``cnml``) kernel, dumped with ``Dumper(use_cpu=True)``; ``dump_diff``'s
  ``own_value`` per op (the device op against the CPU on the same inputs), worst per op name.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn as nn

from mluverify.judge import rel_mse
from mluverify.tune._inference import Deployment, InferenceProblem, deploy


def layer_own_errors(problem: InferenceProblem, layers: Sequence[str]) -> dict[str, float]:
    """Layer name -> its own rel_mse when quantized alone (int8 everywhere, as deployed)."""
    seen = _float_layer_io(problem.model, layers, problem.args)
    quantized = deploy(problem.model, problem.calibration, Deployment(), problem.dtype).to("mlu")
    errors = {}
    with torch.no_grad():
        for name in layers:
            if name not in seen:  # never called on this input
                continue
            layer_input, expected = seen[name]
            actual = quantized.get_submodule(name)(layer_input.to("mlu")).to("cpu")
            errors[name] = rel_mse(actual.double().numpy().ravel(), expected.double().numpy().ravel())
    return errors


def _float_layer_io(model: nn.Module, layers: Sequence[str], args: tuple) -> dict[str, tuple]:
    """Each layer's first input and output in a CPU float pass."""
    seen: dict[str, tuple] = {}

    def hook_for(name: str):
        def keep(module, inputs, output):
            if name not in seen and isinstance(output, torch.Tensor):
                seen[name] = (inputs[0].detach().clone(), output.detach().clone())
        return keep

    handles = [model.get_submodule(name).register_forward_hook(hook_for(name)) for name in layers]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def op_own_errors(problem: InferenceProblem, ops: Sequence[str]) -> dict[str, float]:
    """Op name -> its worst own error with fused-mode kernels (``dump_diff``'s ``own_value``)."""
    if not ops:
        return {}
    from mluverify.device import kernel_mode
    from mluverify.dump import Dumper, dump_diff

    runnable = deploy(problem.model, problem.calibration, Deployment(), problem.dtype).to("mlu")
    inputs = tuple(a.to("mlu") if isinstance(a, torch.Tensor) else a for a in problem.args)
    with tempfile.TemporaryDirectory(prefix="mluverify-tune-") as directory:
        dumper = Dumper(Path(directory) / "dump", enable=True, use_cpu=True, level=1, layout="index")
        with torch.no_grad(), kernel_mode("cnml"), dumper:
            runnable(*inputs)
        table = dump_diff(dumper.path, mode="cnml").table
    worst = table.groupby("op")["own_value"].max()
    return {op: _number(worst.get(_base_name(op), worst.get(op))) for op in ops}


def _base_name(op: str) -> str:
    """The dump names ops by overload packet (``aten::add.Tensor`` -> ``aten::add``) or in full;
    both are looked up."""
    return op.partition(".")[0]


def _number(value: Any) -> float:
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def attribution_scores(problem: InferenceProblem, layers: Sequence[str], ops: Sequence[str]) -> dict[str, float]:
    """Knob key -> own error, for the attribution-ordered search."""
    scores = {f"layer:{name}": error for name, error in layer_own_errors(problem, layers).items()}
    scores.update({f"op:{op}": error for op, error in op_own_errors(problem, ops).items()})
    return scores
