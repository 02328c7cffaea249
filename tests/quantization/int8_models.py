"""The small CNN the real int8 targets' tests quantize (``test_ort_int8``, ``test_openvino_int8``),
its inputs, its planted outlier, and a case run through a pipeline (the ``pipeline`` fixture
of conftest.py)."""
from __future__ import annotations

import torch
from torch import nn

from mluverify.core.case import Case, Target
from mluverify.core.pipeline import Outcome, Pipeline


def cnn() -> nn.Module:
    """Two conv + ReLU layers and a 1x1 conv head whose output is the model's."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 10, 1)).eval()


def images(seed: int = 1) -> torch.Tensor:
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def with_outlier(model: nn.Module) -> nn.Module:
    """The head's channel 3 has one weight 300x the layer's largest: per tensor, one int8 step then
    swallows every other weight of the layer."""
    with torch.no_grad():
        model[4].weight[3, 0] = 300 * model[4].weight.abs().max()
    return model


def run_case(pipeline: Pipeline, target: Target, model: nn.Module, *args: torch.Tensor, quant: str = "int8",
             dtype: str = "float32") -> Outcome:
    """``model(*args)`` verified on ``target`` as case ``t[<target>]``."""
    return pipeline.verify(model, args, {}, Case(f"t[{target}]", "cnn", target, quant=quant, dtype=dtype))
