"""How a case really ran on the ``mlu`` back end: executed_as, its reason, the device facts;
fused programs that fail at run time demote to layer by layer; transformers fuse."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from fusion_models import DataDependent, WithCumsum, make_test_model
from mluverify import hookimpl
from mluverify.core.backends import map_tensors
from mluverify.core.case import Case, Target
from mluverify.judge import compare
from mluverify.device import mlu_model, numerics
from mluverify.device.fusion import fuse, fusion_summary
from mluverify.core.plugin_manager import configured_plugin_manager
from mluverify.plugins.mlu_backend import MluBackend
from transformer_models import AttentionBlock, seeded, suite_networks


def case_for(mode: str, dtype: str = "float32", op: str = "model", **fields) -> Case:
    return Case(case_id=f"provenance::{op}-{mode}-{dtype}", op=op, target=Target("mlu", mode), dtype=dtype, **fields)


def execute(model, inputs: tuple, mode: str = "cnml", dtype: str = "float32", **fields):
    cast = tuple(x.to(getattr(torch, dtype)) if x.is_floating_point() else x for x in inputs)
    return MluBackend().execute(model, cast, {}, case=case_for(mode, dtype, **fields))


class ItemBranch(torch.nn.Module):
    """Branches on ``.item()``: the branch taken depends on the data."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() > 0:
            return torch.relu(x)
        return -x


class ItemScale(torch.nn.Module):
    """Uses ``.item()`` as a number: capturable, but the host read splits the graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x.abs().max().item()


X = torch.rand(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))


# --- executed_as and not_fused_reason ------------------------------------------------------

def test_cnnl_runs_on_the_device_with_the_emulators_facts():
    execution = execute(make_test_model(), (X,), mode="cnnl")
    assert (execution.executed_as, execution.not_fused_reason) == ("device", "")
    # Layer by layer, reductions split across a fixed 4 cores whatever set_core_number says
    # (the seeds: the core number applies to inference, i.e. fused, mode only).
    assert execution.info == {"device_impl": "emulator", "core_version": "MLU270", "core_number": 4}


def test_a_model_every_op_of_which_fuses_is_fused():
    execution = execute(make_test_model(), (X,))
    assert (execution.executed_as, execution.not_fused_reason) == ("fused", "")
    assert execution.info["device_impl"] == "emulator"


@pytest.mark.parametrize("model", [ItemBranch(), DataDependent().eval()], ids=["item-branch", "tensor-branch"])
def test_data_dependent_control_flow_on_cnml_is_layer_by_layer_with_the_reason(model):
    x = X - 0.5
    with pytest.warns(UserWarning, match="layer-by-layer"):
        execution = execute(model, (x,))
    assert execution.executed_as == "layer-by-layer"
    assert f"cannot capture {type(model).__name__}" in execution.not_fused_reason
    assert "data-dependent" in execution.not_fused_reason
    verdict = compare(execution.output, model(x), mode="cnnl")  # layer by layer: CNNL's bound holds
    assert verdict.passed, verdict.reason


def test_an_item_read_as_a_number_splits_the_graph_partially_fused():
    execution = execute(ItemScale(), (X,))
    assert execution.executed_as == "partially fused"
    assert "aten::item" in execution.not_fused_reason  # the max before it has a device kernel: fused
    assert torch.equal(execution.output, X * X.abs().max())


def test_an_op_outside_the_fusible_set_makes_it_partially_fused_naming_the_op():
    execution = execute(WithCumsum().eval(), (X,))
    assert execution.executed_as == "partially fused"
    assert "aten::cumsum (not in the fusible set" in execution.not_fused_reason
    assert "aten::cumsum.out" in execution.fallback_ops  # and the device had no kernel for it


def test_a_model_no_op_of_which_fuses_is_layer_by_layer(monkeypatch):
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::cumsum,aten::conv2d,aten::relu")
    execution = execute(WithCumsum().eval(), (X,))
    assert execution.executed_as == "layer-by-layer"
    assert execution.not_fused_reason.startswith("no op of the captured graph joined a fusion group")
    assert "forced by DEBUG_FORCED_FALLBACK_OPS" in execution.not_fused_reason


def test_fusion_switched_off_is_layer_by_layer_with_the_reason():
    mlu_model._jit_override_can_fuse_on_mlu(False)  # the fixture switches it back on
    execution = execute(make_test_model(), (X,))
    assert execution.executed_as == "layer-by-layer"
    assert "_jit_override_can_fuse_on_mlu(False)" in execution.not_fused_reason


def test_disable_mlu_fusion_is_layer_by_layer_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DISABLE_MLU_FUSION", "1")
    execution = execute(make_test_model(), (X,))
    assert execution.executed_as == "layer-by-layer"
    assert execution.not_fused_reason.startswith("DISABLE_MLU_FUSION=1: graph segmentation is disabled")
    layer_by_layer = execute(make_test_model(), (X,), mode="cnnl")
    assert torch.equal(execution.output, layer_by_layer.output)


# --- core version and core number -----------------------------------------------------------

def _round_to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> 10 explicit mantissa bits, round to nearest even (bit arithmetic)."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return rounded.astype(np.uint32).view(np.float32)


def test_a_case_runs_under_its_core_version_and_the_previous_one_is_restored():
    generator = torch.Generator().manual_seed(11)
    a, b = torch.randn(16, 64, generator=generator), torch.randn(64, 8, generator=generator)
    before = numerics.active_profile().core_version
    execution = MluBackend().execute(torch.mm, (a, b), {}, case=case_for("cnnl", op="mm", core_version="MLU370"))
    assert numerics.active_profile().core_version == before == "MLU270"
    assert execution.info["core_version"] == "MLU370"
    tf32 = _round_to_tf32(a.numpy()).astype(np.float64) @ _round_to_tf32(b.numpy()).astype(np.float64)
    exact = a.double().numpy() @ b.double().numpy()
    assert np.abs(execution.output.numpy() - tf32).max() < 1e-5
    assert np.abs(execution.output.numpy() - exact).max() > 1e-3  # so the profile really changed


def test_the_emulators_variants_are_its_numerics_profiles_default_first():
    assert MluBackend("emulator").variants == tuple(numerics.PROFILES)
    assert MluBackend("emulator").variants[0] == numerics.DEFAULT_CORE_VERSION


def test_a_case_naming_no_core_version_runs_on_the_default_one():
    with mlu_model.core_version("MLU370"):
        execution = execute(make_test_model(), (X,))
        assert numerics.active_profile().core_version == "MLU370"  # restored after the case
    assert execution.info["core_version"] == "MLU270"


def test_an_unknown_core_version_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="MLU270.*MLU370"):
        execute(make_test_model(), (X,), core_version="MLU100")
    assert numerics.active_profile().core_version == "MLU270"


def test_the_record_holds_the_core_number_that_ran():
    mlu_model.set_core_number(16)
    try:
        fused, layer_by_layer = (execute(make_test_model(), (X,), mode=mode) for mode in ("cnml", "cnnl"))
    finally:
        mlu_model.set_core_number(1)
    assert (fused.info["core_number"], layer_by_layer.info["core_number"]) == (16, 4)


# --- a fused program failing at run time ----------------------------------------------------

@torch.library.custom_op("mluverify_tests::twice_on_device", mutates_args=())
def twice_on_device(x: torch.Tensor) -> torch.Tensor:
    """Doubles device tensors; has no CPU implementation, so a fused group (which runs its
    ops on CPU views) cannot run it."""
    raise RuntimeError("twice_on_device has no CPU kernel")


@twice_on_device.register_fake
def _(x):
    return torch.empty_like(x)


@twice_on_device.register_kernel("mlu")
def _(x):
    return (x.cpu() * 2).to("mlu")


class Twice(torch.nn.Module):
    def forward(self, x):
        return torch.relu(twice_on_device(x) - 1)


class FusesTwice:
    @hookimpl
    def mluverify_fusible_ops(self):
        return ["mluverify_tests::twice_on_device"]


@pytest.fixture
def twice_fusible():
    with configured_plugin_manager([FusesTwice()], entry_points=False):
        yield


def test_a_fused_program_failing_at_run_time_demotes_its_signature_to_layer_by_layer(twice_fusible):
    x = torch.tensor([[0.25, 1.0, 2.0]])
    fused = fuse(Twice(), (x.to("mlu"),))
    assert fusion_summary(fused).executed_as == "fused"  # built: the op joined the group
    with pytest.warns(UserWarning, match="twice_on_device has no CPU kernel"):
        out = fused(x.to("mlu")).cpu()
    assert torch.equal(out, torch.tensor([[0.0, 1.0, 3.0]]))
    summary = fusion_summary(fused)
    assert (summary.executed_as, summary.demotions) == ("layer-by-layer", 1)
    assert summary.not_fused_reason == ("fused program of Twice failed for these inputs: "
                                        "RuntimeError: twice_on_device has no CPU kernel")
    assert torch.equal(fused(x.to("mlu")).cpu(), out)  # the signature stays demoted, quietly
    assert (fusion_summary(fused).demotions, fusion_summary(fused).cache.misses) == (1, 1)


def test_the_backend_records_a_demoted_program_as_layer_by_layer(twice_fusible):
    with pytest.warns(UserWarning, match="failed for these inputs"):
        execution = execute(Twice(), (torch.tensor([3.0, -1.0]),))
    assert execution.executed_as == "layer-by-layer"
    assert "twice_on_device has no CPU kernel" in execution.not_fused_reason
    assert torch.equal(execution.output, torch.tensor([5.0, 0.0]))


# --- transformers fuse ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_standard_attention_block_runs_fused_within_the_cnml_bound(dtype):
    model = seeded(AttentionBlock())
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1))
    execution = execute(model, (x,), dtype=dtype)
    assert (execution.executed_as, execution.not_fused_reason, execution.fallback_ops) == ("fused", "", ())
    verdict = compare(execution.output.float(), model(x), mode="cnml")
    assert verdict.passed, verdict.reason


def test_attention_outside_the_groups_still_runs_its_reshape(monkeypatch):
    # SDPA as a per-op device kernel returns another layout than the CPU kernel seen during
    # capture; the captured reshape must not have become a stride-bound view.
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::scaled_dot_product_attention")
    model = seeded(AttentionBlock())
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2))
    execution = execute(model, (x,))
    assert execution.executed_as == "partially fused"
    assert "aten::scaled_dot_product_attention (forced by" in execution.not_fused_reason
    verdict = compare(execution.output, model(x), mode="cnml")
    assert verdict.passed, verdict.reason


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", ["GptDecoder", "BertEncoder", "TransformerEncoderLayer"])
def test_transformer_networks_run_fused_within_the_cnml_bound(name, dtype):
    generator = torch.Generator().manual_seed(4)
    if name == "TransformerEncoderLayer":
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        model, x = seeded(layer), torch.randn(2, 8, 32, generator=generator)
    else:  # token + position embeddings, causal SDPA / encoder layers, LayerNorm, GELU, tied head
        model, x = seeded(getattr(suite_networks(), name)()), torch.randint(0, 512, (2, 16), generator=generator)
    execution = execute(copy.deepcopy(model), (x,), dtype=dtype)
    assert (execution.executed_as, execution.not_fused_reason, execution.fallback_ops) == ("fused", "", ())
    verdict = compare(map_tensors(torch.Tensor.float, execution.output), model(x), mode="cnml")
    assert verdict.passed, verdict.reason


def test_tensors_nested_in_the_inputs_are_captured_on_the_device():
    """An op called as ``fn(input, args, kwargs)`` (the OpInfo suite's form): the tensors in the
    argument tuple and the keyword dict are inputs of the fused program like the first one."""
    def call(input, args, kwargs):
        return torch.add(input, *args, **kwargs)

    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 5, generator=generator), torch.randn(4, 5, generator=generator)
    execution = MluBackend().execute(call, (x, (y,), {"alpha": 2.0}), {}, case=case_for("cnml", op="add"))
    assert (execution.executed_as, execution.not_fused_reason) == ("fused", "")
    np.testing.assert_array_equal(execution.output.numpy(), (x + 2.0 * y).numpy())


@pytest.mark.parametrize("layer_type", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_recurrent_layers_fuse_into_the_devices_cell_kernels(layer_type):
    """An LSTM / GRU (with its zero initial state) is one fusion group whose engine runs the
    device's kernels (quantized addmm, sigmoid, tanh), not the CPU's oneDNN RNN kernel."""
    torch.manual_seed(0)
    layer = layer_type(5, 7, 2, bidirectional=True).eval()
    x = torch.randn(4, 3, 5)
    expected = layer(x)[0]
    with torch.no_grad():
        fused = fuse(layer.to("mlu"), (x.to("mlu"),))
        output = fused(x.to("mlu"))[0].cpu()
    assert fusion_summary(fused).executed_as == "fused"
    program = fused.runtime.program((x.to("mlu"),))
    engine_ops = {getattr(node.target, "__name__", str(node.target)) for group in program.groups
                  for node in group.engine.graph.nodes if node.op == "call_function"}
    assert "addmm" in engine_ops and not any("mkldnn" in name or "rnn" in name for name in engine_ops), engine_ops
    assert compare(output, expected, mode="cnml").passed
