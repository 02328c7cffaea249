"""Training trials: one training step's gradients with ``adaptive_quantize`` layers at 8, 16 or
31 bits on ``mlu``, judged per parameter against the float step on the CPU (the worst one
decides)."""
from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

import torch
import torch.nn as nn

from mluverify.device.quantization import adaptive_quantize
from mluverify.device.quantization._adaptive import ADAPTIVE_MAPPING
from mluverify.judge import compare, rel_mse
from mluverify.tune._inference import as_args
from mluverify.tune._search import Knob, Outcome, judged

BITS_LADDER = (8, 16, 31)


def with_bits(model: nn.Module, steps_per_epoch: int, bits: Mapping[str, int], bitwidth: int = 8) -> nn.Module:
    """A copy of ``model`` trained in adaptive quantized arithmetic, in the seeds' own calls:
    each layer named in ``bits`` gets ``adaptive_quantize(layer, steps_per_epoch, bitwidth=b)``
    first, then the whole model ``adaptive_quantize(..., bitwidth=bitwidth)`` (which leaves the
    layers already swapped alone: it swaps exact ``nn.Linear`` / ``nn.ConvNd`` types only)."""
    model = copy.deepcopy(model)
    for name, layer_bits in bits.items():
        parent, _, child = name.rpartition(".")
        holder = model.get_submodule(parent)
        setattr(holder, child, adaptive_quantize(getattr(holder, child), steps_per_epoch, bitwidth=layer_bits))
    if any(type(module) in ADAPTIVE_MAPPING for module in model.modules()):  # else: all kept, nothing left
        model = adaptive_quantize(model, steps_per_epoch, bitwidth=bitwidth, inplace=True)
    return model


def _gradients(model: nn.Module, args: tuple, target: Any, loss: Callable, device: str) -> dict[str, torch.Tensor]:
    model = model.to(device).train()
    moved = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    target = target.to(device) if isinstance(target, torch.Tensor) else target
    model.zero_grad(set_to_none=True)
    loss(model(*moved), target).backward()
    return {name: p.grad.detach().to("cpu") for name, p in model.named_parameters() if p.grad is not None}


class TrainingProblem:
    """One training step (``loss(model(*inputs), target).backward()``) on ``mlu`` with adaptive
    quantized layers, judged gradient by gradient (``cnml`` policy's rel_mse, ``bound``)."""

    def __init__(self, model: nn.Module, inputs: Any, target: Any, loss: Callable, *, bound: float,
                 steps_per_epoch: int = 1) -> None:
        self.model = copy.deepcopy(model)
        self.args = as_args(inputs)
        self.target = target
        self.loss = loss
        self.bound = bound
        self.steps_per_epoch = steps_per_epoch
        torch.manual_seed(0)
        self.reference = _gradients(copy.deepcopy(self.model), self.args, target, loss, "cpu")

    def layer_names(self) -> list[str]:
        return [name for name, module in self.model.named_modules() if name and type(module) in ADAPTIVE_MAPPING]

    def knobs(self) -> list[Knob]:
        return [Knob("layer", name, BITS_LADDER) for name in self.layer_names()]

    def device_gradients(self, bits: Mapping[str, int]) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)  # dropout, if any, draws as the reference did
        return _gradients(with_bits(self.model, self.steps_per_epoch, bits), self.args, self.target, self.loss, "mlu")

    def outcome(self, bits: Mapping[str, int]) -> Outcome:
        verdict = compare(self.device_gradients(bits), self.reference, mode="cnml", tolerance=self.bound)
        return judged(verdict, self.bound)

    def scores(self, rung: int = 0) -> dict[str, float]:
        """Knob key -> the worst rel_mse of the layer's own parameters' gradients in the step with
        every layer at ``rung`` (8 bits at rung 0; the last layers' errors are their own, earlier
        ones add what the backward inherits)."""
        bits = BITS_LADDER[rung]
        gradients = self.device_gradients({name: bits for name in self.layer_names()} if rung else {})
        scores: dict[str, float] = {}
        for name, grad in gradients.items():
            layer = name.rpartition(".")[0]
            error = rel_mse(grad.double().numpy().ravel(), self.reference[name].double().numpy().ravel())
            scores[f"layer:{layer}"] = max(scores.get(f"layer:{layer}", 0.0), error)
        return {key: value for key, value in scores.items() if key.partition(":")[2] in self.layer_names()}
