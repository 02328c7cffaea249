"""The other ways in: ``torch.compile(backend="mlu")`` and the ``mlu:cnml`` target."""
from __future__ import annotations

import copy

import pytest
import torch

from fusion_models import make_test_model
from mluverify.core.case import Case, Target
from mluverify.judge import compare
from mluverify.device.fusion import compiled_summaries
from mluverify.plugins.mlu_backend import MluBackend

SEED_OPS = {"aten::add.Tensor", "aten::max_pool2d", "aten::transpose.int", "aten::relu",
            "aten::_native_batch_norm_legit_no_training"}


@pytest.fixture
def x():
    return torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(9))


def test_torch_compile_with_backend_mlu_runs_fused(x):
    torch._dynamo.reset()
    model = make_test_model()
    compiled = torch.compile(copy.deepcopy(model).to("mlu"), backend="mlu")
    out = compiled(x.to("mlu"))
    compiled(x.to("mlu"))
    [summary] = compiled_summaries()
    assert summary.group_names == ("MLUFusionGroup0",)
    assert SEED_OPS <= set(summary.groups[0].ops)
    assert (summary.cache.hits, summary.cache.misses) == (1, 1)
    assert not torch.equal(out.cpu(), model(x))  # weights bound as constants: conv+BN folded
    verdict = compare(out.cpu(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason
    torch._dynamo.reset()


def cnml_case(dtype: str, quant: str = "") -> Case:
    return Case(case_id=f"fusion::{dtype}{quant}", op="TestModel", target=Target("mlu", "cnml"),
                dtype=dtype, quant=quant)


@pytest.mark.parametrize("dtype, quant", [("float32", ""), ("float16", ""), ("float32", "int8"), ("float16", "int16")])
def test_mlu_cnml_target_is_fused_and_judged_by_the_cnml_policy(x, dtype, quant):
    backend = MluBackend()
    assert backend.policy("cnml") == "cnml"
    model = make_test_model()
    case = cnml_case(dtype, quant)
    execution = backend.execute(model, (x.to(getattr(torch, dtype)),), {}, case=case)
    assert execution.output.device.type == "cpu"
    assert execution.fallback_ops == ()
    verdict = compare(execution.output.float(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason
    assert not torch.equal(execution.output.float(), model(x))


def test_mlu_cnml_quantized_differs_from_float_fused(x):
    backend = MluBackend()
    model = make_test_model()
    fused = backend.execute(model, (x,), {}, case=cnml_case("float32")).output
    quantized = backend.execute(model, (x,), {}, case=cnml_case("float32", "int8")).output
    # int8 rounding errors are orders of magnitude above float32 folding differences
    assert (quantized - model(x)).abs().max() > 100 * (fused - model(x)).abs().max()


def test_mlu_cnml_target_accepts_plain_functions_with_keyword_arguments():
    a, b = torch.rand(4, 5), torch.rand(4, 5)
    execution = MluBackend().execute(torch.add, (a, b), {"alpha": 2.0}, case=cnml_case("float32"))
    verdict = compare(execution.output, torch.add(a, b, alpha=2.0), mode="cnml")
    assert verdict.passed, verdict.reason
