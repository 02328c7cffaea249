"""Which knobs to try first: each layer's and each op's **own** error, not the error it inherits.

* A layer's quantization error at the output: the float model on the CPU with that one layer
  quantized on ``mlu`` (rel_mse of the model's output, as a trial judges it).
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

from mluverify.judge import compare
from mluverify.tune._inference import PRECISION_LADDER, Deployment, InferenceProblem, deploy
from mluverify.tune._search import judged


def layer_output_errors(problem: InferenceProblem, layers: Sequence[str], dtype: str | None = None,
                        ) -> dict[str, float]:
    """Layer name -> the model output's error when that layer alone runs quantized on ``mlu``.

    The float model runs on the CPU with one layer's output replaced by its quantized twin's
    (in ``dtype``, by default as deployed; on ``mlu``, fed the float layer's own input), so the
    score is the layer's own quantization error as the output sees it: amplified or damped by
    what follows, never inherited from upstream layers (``layer_errors`` scores include that)."""
    quantized = deploy(problem.model, problem.calibration, Deployment(), dtype or problem.dtype).to("mlu")
    return {name: _output_error(problem, name, quantized.get_submodule(name)) for name in layers}


def _output_error(problem: InferenceProblem, name: str, device_layer: nn.Module) -> float:
    def on_device(module, inputs, output):
        return device_layer(*(a.to("mlu") if isinstance(a, torch.Tensor) else a for a in inputs)).to("cpu")

    handle = problem.model.get_submodule(name).register_forward_hook(on_device)
    try:
        with torch.no_grad():
            output = problem.model(*problem.args)
    finally:
        handle.remove()
    return judged(compare(output, problem.reference, mode="cnml", tolerance=problem.bound), problem.bound).metric


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


def attribution_scores(problem: InferenceProblem, layers: Sequence[str], ops: Sequence[str], rung: int = 0,
                       ) -> dict[str, float]:
    """Knob key -> own error at ``rung`` of its ladder, for the attribution-ordered search
    (rung 0: as deployed; a float layer and an op on CNNL: 0)."""
    if rung == 0:
        scores = {f"layer:{name}": error for name, error in layer_output_errors(problem, layers).items()}
        scores.update({f"op:{op}": error for op, error in op_own_errors(problem, ops).items()})
        return scores
    dtype = PRECISION_LADDER[rung]
    if dtype == "float":
        return {}
    return {f"layer:{name}": error for name, error in layer_output_errors(problem, layers, dtype).items()}
