"""Forced fallbacks, models that cannot be captured, the compile cache and graph printing."""
from __future__ import annotations

import copy
import logging

import pytest
import torch

from fusion_models import DataDependent, WithCumsum, make_test_model
from mluverify.judge import compare
from mluverify.device.fusion import fuse, fusion_summary

FORCED = "forced by DEBUG_FORCED_FALLBACK_OPS"


@pytest.fixture
def model_on_mlu():
    return make_test_model(in_channels=3).to("mlu")


@pytest.fixture
def x():
    return torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))


def test_forced_fallback_op_is_in_no_group(monkeypatch, model_on_mlu, x):
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor")
    expected = make_test_model(in_channels=3)(x)
    fused = fuse(model_on_mlu, (x.to("mlu"),))
    out = fused(x.to("mlu"))
    summary = fusion_summary(fused)
    assert summary.group_names == ("MLUFusionGroup0", "MLUFusionGroup1")
    assert all("aten::add.Tensor" not in g.ops for g in summary.groups)
    [fallback] = [f for f in summary.fallbacks if f.op == "aten::add.Tensor"]
    assert (fallback.runs_on, fallback.reason, fallback.count) == ("cnnl", FORCED, 1)
    verdict = compare(out.cpu(), expected, mode="cnml")
    assert verdict.passed, verdict.reason


def test_forced_fallback_of_every_op_runs_everything_per_op(monkeypatch, model_on_mlu, x):
    ops = ["aten::conv2d", "aten::_native_batch_norm_legit_no_training", "aten::relu",
           "aten::add.Tensor", "aten::max_pool2d", "aten::transpose.int"]
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", ",".join(ops))
    fused = fuse(model_on_mlu, (x.to("mlu"),))
    out = fused(x.to("mlu"))
    summary = fusion_summary(fused)
    assert summary.groups == ()
    assert {f.op for f in summary.fallbacks} == set(ops)
    verdict = compare(out.cpu(), make_test_model(in_channels=3)(x), mode="cnnl")
    assert verdict.passed, verdict.reason


def test_unknown_forced_fallback_op_warns_naming_it(monkeypatch, model_on_mlu, x):
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor, aten::no_such_op")
    with pytest.warns(UserWarning, match="'aten::no_such_op'"):
        fuse(model_on_mlu, (x.to("mlu"),))


def test_second_call_hits_the_cache_and_a_new_shape_compiles_once(model_on_mlu, x):
    fused = fuse(model_on_mlu, (x.to("mlu"),))
    assert (fusion_summary(fused).cache.hits, fusion_summary(fused).cache.misses) == (0, 1)
    fused(x.to("mlu"))
    fused(x.to("mlu"))
    assert (fusion_summary(fused).cache.hits, fusion_summary(fused).cache.misses) == (2, 1)
    bigger = torch.rand(2, 3, 40, 40).to("mlu")
    fused(bigger)
    fused(bigger)
    assert (fusion_summary(fused).cache.hits, fusion_summary(fused).cache.misses) == (3, 2)


def test_graph_break_falls_back_to_layer_by_layer(model_on_mlu):
    model = DataDependent().eval()
    x = torch.rand(1, 3, 16, 16)
    on_mlu = copy.deepcopy(model).to("mlu")
    with pytest.warns(UserWarning, match="layer-by-layer"):
        fused = fuse(on_mlu, (x.to("mlu"),))
    out = fused(x.to("mlu"))
    summary = fusion_summary(fused)
    assert summary.layer_by_layer_reason and "DataDependent" in summary.layer_by_layer_reason
    assert [(f.runs_on, f.count) for f in summary.fallbacks] == [("layer-by-layer", 1)]
    assert torch.equal(out.cpu(), on_mlu(x.to("mlu")).cpu())
    verdict = compare(out.cpu(), model(x), mode="cnnl")
    assert verdict.passed, verdict.reason


def test_log_level_minus_one_prints_the_partitioned_graph(monkeypatch, caplog, model_on_mlu, x):
    monkeypatch.setenv("TORCH_MIN_CNLOG_LEVEL", "-1")
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor")
    # the device's logger at DEBUG, as TORCH_MIN_CNLOG_LEVEL=-1 sets it when the device is imported
    with caplog.at_level(logging.DEBUG, logger="mluverify.device"):
        fuse(model_on_mlu, (x.to("mlu"),))
    logged = [r for r in caplog.records if r.name == "mluverify.device.fusion"]
    printed = "\n".join(r.getMessage() for r in logged)
    assert {r.levelname for r in logged} == {"DEBUG"}  # debugging information, not a warning
    assert "call_module[target=MLUFusionGroup0]" in printed
    assert "call_module[target=MLUFusionGroup1]" in printed
    assert "aten.add.Tensor" in printed


def test_graph_is_not_printed_by_default(caplog, model_on_mlu, x):
    with caplog.at_level(logging.DEBUG, logger="mluverify.device"):
        fuse(model_on_mlu, (x.to("mlu"),))
    assert not [r for r in caplog.records if r.name == "mluverify.device.fusion"]


def test_an_op_the_device_lacks_runs_on_the_cpu_counted_with_its_reason(x):
    torch.manual_seed(8)
    model = WithCumsum().eval()
    fused = fuse(copy.deepcopy(model).to("mlu"), (x.to("mlu"),))
    out = fused(x.to("mlu"))
    fused(x.to("mlu"))
    summary = fusion_summary(fused)
    assert summary.group_names == ("MLUFusionGroup0", "MLUFusionGroup1")
    outside = [f for f in summary.fallbacks if f.runs_on == "cnnl"]
    assert [(f.op, f.reason) for f in outside] == [("aten::cumsum", "not in the fusible set (mluverify_fusible_ops)")]
    on_cpu = [f for f in summary.fallbacks if f.runs_on == "cpu"]
    assert on_cpu and all(f.reason == "no device kernel" and f.count == 2 for f in on_cpu)
    assert any("cumsum" in f.op for f in on_cpu)
    verdict = compare(out.cpu(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason


class Recurrent(torch.nn.Module):
    """An LSTM creates its initial state with a factory op on the input's device."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def test_factories_outside_the_groups_create_device_tensors():
    torch.manual_seed(10)
    model = Recurrent().eval()
    x = torch.rand(2, 5, 6)
    fused = fuse(copy.deepcopy(model).to("mlu"), (x.to("mlu"),))
    verdict = compare(fused(x.to("mlu")).cpu(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("lstm_fusion", [True, False])
def test_mlufusion_off_captures_recurrent_layers_as_their_cell_ops(lstm_fusion):
    torch.manual_seed(10)
    model = Recurrent().eval()
    x = torch.rand(2, 5, 6)
    with torch.backends.mlufusion.flags(enabled=lstm_fusion):
        fused = fuse(copy.deepcopy(model).to("mlu"), (x.to("mlu"),))
        out = fused(x.to("mlu")).cpu()
    summary = fusion_summary(fused)
    captured = {f.op for f in summary.fallbacks} | {op for g in summary.groups for op in g.ops}
    assert ("aten::lstm.input" in captured) is lstm_fusion
    if not lstm_fusion:  # the cells' gates: matrix products and their activations, fused
        assert {"aten::sigmoid", "aten::tanh"} <= {op for g in summary.groups for op in g.ops}
    verdict = compare(out, model(x), mode="cnml")
    assert verdict.passed, verdict.reason


class _MaskedSelect(torch.nn.Module):
    def forward(self, x, mask):
        return torch.masked_select(x, mask)


def test_a_captured_shape_assumption_that_fails_at_run_time_falls_back_to_layer_by_layer():
    # torch.export assumes masked_select returns at most x.numel() values; a broadcast mask
    # selects more (here up to 30 of 10), so the captured graph's assertion fails on real data.
    x, mask = torch.randn(10), torch.ones(3, 10, dtype=torch.bool)
    fused = fuse(_MaskedSelect(), (x.to("mlu"), mask.to("mlu")))
    with pytest.warns(UserWarning, match="failed for these inputs"):
        out = fused(x.to("mlu"), mask.to("mlu")).cpu()
    assert torch.equal(out, torch.masked_select(x, mask))
    (fallback,) = fusion_summary(fused).fallbacks
    assert fallback.runs_on == "layer-by-layer" and "u0 <= 10" in fallback.reason
    assert torch.equal(fused(x.to("mlu"), mask.to("mlu")).cpu(), out)  # and stays so, quietly
