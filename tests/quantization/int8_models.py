"""The small CNN the real int8 targets' tests quantize (``test_real_int8``, ``test_ort_int8``,
``test_openvino_int8``), its inputs, its planted outlier, a case run through a pipeline (the
``pipeline`` fixture of conftest.py), and the ``openvino_int8`` fixture."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from torch import nn

from mluverify.core.case import Case, Target
from mluverify.core.pipeline import Outcome, Pipeline
from mluverify.errors import Unsupported


@pytest.fixture
def openvino_int8() -> None:
    """Skips with the install line where openvino:int8 cannot run; fails under CI=true where its
    packages are installed but it still cannot."""
    from mluverify.plugins.openvino_backend import OpenVinoBackend

    backend = OpenVinoBackend()
    reason = backend.unavailable_reason() or backend.mode_unavailable_reason("int8")
    installed = all(importlib.util.find_spec(name) for name in ("openvino", "nncf"))
    if reason and installed and os.environ.get("CI") == "true":
        pytest.fail(f"openvino:int8 is installed but cannot run: {reason}")
    if reason:
        pytest.skip(f"openvino:int8 unavailable: {reason}")


def cnn() -> nn.Module:
    """Two conv + ReLU layers and a 1x1 conv head whose output is the model's."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 10, 1)).eval()


class ShapeOfFirst(nn.Module):
    """``cnn()`` of its second input, flattened per sample of its first input's size: the exported
    program never reads the first input's values, so both runtimes' models drop that input."""

    def __init__(self):
        super().__init__()
        self.body = cnn()

    def forward(self, like: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).reshape(like.shape[0], -1)


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


def check_refusals(pipeline: Pipeline, target: Target, float_target: Target) -> None:
    """``target`` (an int8 mode) skips what it does not run as asked, and so does ``float_target``
    of the same back end for a quantized case, naming ``target`` as the mode that quantizes."""
    with pytest.raises(Unsupported, match=rf"{target} runs int8 models only: ask for quant='int8'"):
        run_case(pipeline, target, cnn(), images(), quant="")
    with pytest.raises(Unsupported, match=r"dtype is 'float16'"):
        run_case(pipeline, target, cnn(), images(), dtype="float16")
    with pytest.raises(Unsupported, match=rf"quantizes nothing.*the modes that quantize: {target}"):
        run_case(pipeline, float_target, cnn(), images())
    with pytest.raises(Unsupported, match=r"has none left to quantize"):
        run_case(pipeline, target, nn.ReLU(), images())
