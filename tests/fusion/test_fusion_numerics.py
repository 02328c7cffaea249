"""Fused numerics: the groups run the device's kernels (quantized conv on MLU270, TF32-like conv
on MLU370), a plugin's kernel reaches them through ``mluverify_device_kernels``, several
outputs, linear."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import numerics_reference as ref
from fusion_models import make_test_model
from mluverify import hookimpl
from mluverify.judge import compare
from mluverify.device import mlu_model
from mluverify.device.fusion import fuse, fusion_summary
from mluverify.device.numerics import numerics_settings, round_mantissa
from mluverify.core.plugin_manager import configured_plugin_manager


@pytest.fixture
def mlu370():
    previous = mlu_model.get_core_version()
    mlu_model.set_core_version("MLU370")
    yield
    mlu_model.set_core_version(previous)


def _folded(model):
    """TestModel's conv with its batch-norm folded in (as torch.nn.utils.fusion folds it)."""
    conv, bn = model.block1[0], model.block1[1]
    scale = torch.rsqrt(bn.running_var + bn.eps)
    return (conv.weight * scale.reshape(-1, 1, 1, 1)).detach(), (-bn.running_mean * scale).detach()


def _after_conv(y: torch.Tensor) -> torch.Tensor:
    """TestModel after its conv + batch-norm: relu, y + y, 2x2 max-pool, transpose (all exact)."""
    return torch.transpose(F.max_pool2d(torch.relu(y) * 2, 2), 0, 3)


def test_mlu370_rounds_folded_weights_and_conv_inputs_to_tf32(mlu370):
    """One core (the default core number): one float32 conv of the rounded values, then the bias."""
    model = make_test_model()
    x = torch.rand(1, 3, 20, 20, generator=torch.Generator().manual_seed(2))
    out = fuse(copy.deepcopy(model).to("mlu"), (x.to("mlu"),))(x.to("mlu")).cpu()
    weight, bias = _folded(model)
    y = F.conv2d(round_mantissa(x, 10), round_mantissa(weight, 10)) + bias.reshape(1, -1, 1, 1)
    assert torch.equal(out, _after_conv(y))


def test_mlu270_quantizes_the_folded_weights_and_the_conv_input():
    """int8 (exact: 27 products per output stay below 2**24): the int64 conv of the quantized
    input and folded weight, dequantized, plus the folded bias, bit for bit."""
    model = make_test_model()
    x = torch.rand(1, 3, 20, 20, generator=torch.Generator().manual_seed(2))
    with numerics_settings(core_version="MLU270", matmul_precision="int8"):
        out = fuse(copy.deepcopy(model).to("mlu"), (x.to("mlu"),))(x.to("mlu")).cpu()
    weight, bias = _folded(model)
    qx, sx = ref.quantize(x.numpy(), 127)
    qw, sw = ref.quantize(weight.numpy(), 127)
    y = ref.dequantize(ref.conv_int64(qx, qw, (1, 1), (0, 0), (1, 1), 1), sx, sw) + bias.numpy().reshape(1, -1, 1, 1)
    assert torch.equal(out, _after_conv(torch.from_numpy(y)))


class _PlantedFusedRelu:
    """A plugin whose ReLU kernel for the fused mode scales by 2 (and one for both modes, 3)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::relu", lambda x: torch.relu(x) * (2 if self.mode == "cnml" else 3), mode=self.mode)


@pytest.mark.parametrize("mode, fused_factor, layer_factor", [("cnml", 2, 1), ("cnnl", 3, 3)])
def test_a_plugins_kernel_reaches_fused_groups(mode, fused_factor, layer_factor):
    """Fused groups take every op's kernel from the registry: a ``cnml`` kernel changes the fused
    result only, a ``cnnl`` one (the default mode) both, as the planted-bug check relies on."""
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU()).eval()
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    with configured_plugin_manager([_PlantedFusedRelu(mode)], entry_points=False), \
            numerics_settings(matmul_precision="float"), torch.no_grad():
        on_mlu = copy.deepcopy(model).to("mlu")
        fused = fuse(on_mlu, (x.to("mlu"),))(x.to("mlu")).cpu()
        layer_by_layer = on_mlu(x.to("mlu")).cpu()
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(fused, expected * fused_factor)
    torch.testing.assert_close(layer_by_layer, expected * layer_factor)


def test_a_program_cached_for_one_core_version_is_not_reused_for_another():
    model = make_test_model().to("mlu")
    x = torch.rand(1, 3, 20, 20).to("mlu")
    fused = fuse(model, (x,))
    previous = mlu_model.get_core_version()
    mlu_model.set_core_version("MLU370" if previous != "MLU370" else "MLU270")
    try:
        fused(x)
    finally:
        mlu_model.set_core_version(previous)
    assert fusion_summary(fused).cache.misses == 2


class TwoHeads(nn.Module):
    """A classifier head and a feature output: a group with two outputs and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        features = torch.relu(self.bn(self.conv(x)))
        pooled = F.adaptive_avg_pool2d(features, 1).flatten(1)
        return self.fc(pooled), features


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_two_outputs_and_linear_fuse_into_one_group_within_tolerance(dtype):
    torch.manual_seed(4)
    model = TwoHeads().eval()
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    x = torch.rand(2, 3, 12, 12)
    expected = model(x)
    on_mlu = copy.deepcopy(model).to(dtype).to("mlu")
    fused = fuse(on_mlu, (x.to(dtype).to("mlu"),))
    logits, features = fused(x.to(dtype).to("mlu"))
    assert (logits.dtype, features.dtype, logits.device.type) == (dtype, dtype, "mlu")
    assert fusion_summary(fused).group_names == ("MLUFusionGroup0",)
    for actual, reference in ((logits, expected[0]), (features, expected[1])):
        verdict = compare(actual.cpu().float(), reference, mode="cnml")
        assert verdict.passed, verdict.reason


def test_fuse_runs_cpu_modules_on_the_cpu():
    model = make_test_model()
    x = torch.rand(1, 3, 16, 16)
    out = fuse(model, (x,))(x)
    assert out.device.type == "cpu"
    verdict = compare(out, model(x), mode="cnml")
    assert verdict.passed, verdict.reason


class SharedIntermediates(nn.Module):
    """Values read twice, and an input activated directly: nothing may be overwritten in place."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y) + y * 2, torch.relu(x) + x


def test_in_place_reuse_never_overwrites_shared_values_or_inputs():
    torch.manual_seed(6)
    model = SharedIntermediates().eval()
    x = torch.randn(1, 3, 8, 8)
    x_mlu = x.to("mlu")
    fused = fuse(copy.deepcopy(model).to("mlu"), (x_mlu,))
    outputs = fused(x_mlu)
    assert torch.equal(x_mlu.cpu(), x)
    for actual, expected in zip(outputs, model(x)):
        verdict = compare(actual.cpu(), expected, mode="cnnl")
        assert verdict.passed, verdict.reason


class BroadcastIntoAFreshValue(nn.Module):
    """A fresh intermediate smaller than the sum it enters (Swin's window mask broadcasts so):
    the sum cannot be written into it."""

    def forward(self, x, y):
        return (x * 2) + y, (y * 2) + x


def test_in_place_reuse_keeps_to_operands_of_the_results_shape():
    generator = torch.Generator().manual_seed(7)
    x, y = torch.randn(1, 8, 1, 1, generator=generator), torch.randn(1, 8, 8, 1, generator=generator)
    fused = fuse(BroadcastIntoAFreshValue().to("mlu"), (x.to("mlu"), y.to("mlu")))
    outputs = fused(x.to("mlu"), y.to("mlu"))
    assert fusion_summary(fused).executed_as == "fused"  # the program did not raise and fall back
    for actual, expected in zip(outputs, BroadcastIntoAFreshValue()(x, y)):
        assert actual.shape == expected.shape
        verdict = compare(actual.cpu(), expected, mode="cnml")
        assert verdict.passed, verdict.reason
