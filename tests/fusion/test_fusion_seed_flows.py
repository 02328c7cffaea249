"""The seeds' fused-inference flows: TestModel traced, moved to ``mlu`` and called, per precision."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

from fusion_models import make_test_model, quantized_on_mlu
from mluverify.core.case import Case, Target
from mluverify.judge import compare
from mluverify.device import mlu_model
from mluverify.device.fusion import fusion_summary
from mluverify.plugins.mlu_backend import run_layer_by_layer

SEED_OPS = {"aten::add.Tensor", "aten::max_pool2d", "aten::transpose.int", "aten::relu",
            "aten::_native_batch_norm_legit_no_training"}
PRECISIONS = ["float32", "float16", "int8/float32", "int16/float16"]


def trace(model, example):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.trace is deprecated upstream
        return torch.jit.trace(model, example, check_trace=False)


def seed_flow(precision: str, model, x):
    """Run one of the chapter's four scripts; returns the traced module and its mlu output."""
    traced, _ = traced_and_eager(precision, model, x)
    return traced, traced(x.to(storage_dtype(precision)).to("mlu"))


def storage_dtype(precision: str) -> torch.dtype:
    return torch.float16 if precision.endswith("float16") else torch.float32


def traced_and_eager(precision: str, model, x):
    """The chapter's traced module for ``precision``, on mlu, and the eager module it traced."""
    model = copy.deepcopy(model)  # a traced module shares its parameters with the model
    if precision in ("float32", "float16"):
        eager = copy.deepcopy(model).to(storage_dtype(precision))
        traced = trace(model, x)
        traced.to(storage_dtype(precision)).to(mlu_model.mlu_device())
        return traced, eager
    quant, _, storage = precision.partition("/")
    eager = quantized_on_mlu(model, quant, torch.rand(x.shape, generator=torch.Generator().manual_seed(3)))
    traced = trace(eager, x.to("mlu"))
    if storage == "float16":
        traced.half()
        eager.half()
    return traced, eager


@pytest.fixture
def model():
    return make_test_model(in_channels=3)


@pytest.fixture
def x():
    return torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_fused_within_two_percent_of_float_cpu(precision, model, x):
    traced, out = seed_flow(precision, model, x)
    verdict = compare(out.cpu().float(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason
    assert out.device.type == "mlu"
    assert out.dtype == (torch.float16 if precision.endswith("float16") else torch.float32)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_whole_model_is_one_group(precision, model, x):
    traced, _ = seed_flow(precision, model, x)
    summary = fusion_summary(traced)
    assert summary.group_names == ("MLUFusionGroup0",)
    assert SEED_OPS <= set(summary.groups[0].ops)
    assert summary.fallbacks == ()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_fused_result_differs_from_cpu_deterministically(precision, model, x):
    traced, first = seed_flow(precision, model, x)
    second = traced(x.to(first.dtype).to("mlu"))
    assert torch.equal(first.cpu(), second.cpu())
    assert not torch.equal(first.cpu().float(), model(x))


def folded_reference(model, x, storage: torch.dtype):
    """The fused engine's numerics written out independently: batch-norm folded into the conv
    weights in float32, folded weights rounded to the storage dtype, the conv output rounded
    to the storage dtype once, everything else exact in that precision."""
    conv, bn = model.block1[0], model.block1[1]
    weight = conv.weight.to(storage).float()
    mean, var = bn.running_mean.to(storage).float(), bn.running_var.to(storage).float()
    scale = torch.rsqrt(var + bn.eps)
    folded_weight = (weight * scale.reshape(-1, 1, 1, 1)).to(storage).float()
    folded_bias = (-mean * scale).to(storage).float()
    y = F.conv2d(x.to(storage).float(), folded_weight, folded_bias).to(storage).float()
    z = torch.relu(y) * 2
    return torch.transpose(F.max_pool2d(z, 2), 0, 3).to(storage)


@pytest.mark.usefixtures("float_matmul")  # folding and storage precision, not quantization
@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_fused_numerics_fold_conv_bn_and_keep_storage_precision(precision, model, x):
    storage = torch.float16 if precision == "float16" else torch.float32
    _, out = seed_flow(precision, model, x)
    assert torch.equal(out.cpu(), folded_reference(model, x, storage))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_fusion_disabled_equals_mlu_cnnl(precision, model, x):
    traced, eager = traced_and_eager(precision, model, x)
    inputs = (x.to(storage_dtype(precision)),)
    mlu_model._jit_override_can_fuse_on_mlu(False)
    unfused = traced(inputs[0].to("mlu")).cpu()
    assert fusion_summary(traced).cache.misses == 0  # nothing was captured
    case = Case(case_id="fusion-off", op="TestModel", target=Target("mlu", "cnnl"),
                dtype=str(inputs[0].dtype).removeprefix("torch."))
    assert torch.equal(unfused, run_layer_by_layer(eager, inputs, {}, case=case).cpu())


@pytest.mark.parametrize("precision", ["float32", "float16"])
def test_fused_differs_from_layer_by_layer(precision, model, x):
    traced, fused = seed_flow(precision, model, x)
    mlu_model._jit_override_can_fuse_on_mlu(False)
    assert not torch.equal(fused.cpu(), traced(x.to(fused.dtype).to("mlu")).cpu())
