"""The OpInfo case source: which op_db entries reach a claimed op, and the cases it yields."""
from __future__ import annotations

import pytest

from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.plugins.opinfo_cases import OpInfoSource, _in_namespaces, base_name


@pytest.mark.parametrize("op, expected", [
    ("aten::add_.Tensor", "add"), ("aten::_softmax", "softmax"), ("aten::relu", "relu"),
    ("permute", "permute"), ("mluverify::quant_conv", "quant_conv"),
])
def test_base_name(op: str, expected: str) -> None:
    assert base_name(op) == expected


@pytest.mark.parametrize("name, kept", [
    ("add", True), ("nn.functional.conv2d", True), ("masked.sum", False), ("sparse.mm", False),
    ("linalg.norm", False),
])
def test_only_torch_level_entries(name: str, kept: bool) -> None:
    assert _in_namespaces(name) is kept


def test_the_hook_contributes_the_opinfo_source() -> None:
    sources = [s for answer in new_plugin_manager().hook.mluverify_case_sources() for s in answer]
    assert sorted(s.name for s in sources) == ["captured", "opinfo"]


def test_cases_reach_claimed_ops_through_composites_and_are_deterministic() -> None:
    source = OpInfoSource(max_samples=4)
    first = list(source.cases(["aten::convolution_overrideable", "aten::relu"]))
    names = {case.op for case in first}
    assert {"nn.functional.conv2d", "nn.functional.relu", "nn.functional.conv_transpose2d"} <= names
    assert not any(name.startswith("masked.") for name in names)
    assert all(sum(c.op == name and c.dtype == "float32" for c in first) <= 4 for name in names)
    again = list(OpInfoSource(max_samples=4).cases(["aten::convolution_overrideable", "aten::relu"]))
    assert [c.case_name for c in again] == [c.case_name for c in first]
    assert all(a.input.equal(b.input) for a, b in zip(first, again) if hasattr(a.input, "equal"))


def test_float16_cases_are_on_float16s_grid_and_follow_their_float32_samples() -> None:
    import torch

    cases = list(OpInfoSource(max_samples=4, max_half_samples=2).cases(["aten::relu"]))
    half = [c for c in cases if c.dtype == "float16"]
    assert half and all(c.case_name.endswith("-float16") for c in half)
    float32_names = {c.case_name for c in cases if c.dtype == "float32"}
    for case in half:
        assert case.case_name.removesuffix("-float16") in float32_names
        assert sum(c.op == case.op and c.dtype == "float16" for c in cases) <= 2
        x = case.input
        assert x.dtype == torch.float32 and torch.equal(x.to(torch.float16).to(torch.float32), x)


def test_interpolate_variants_map_to_the_mode_they_run() -> None:
    names = {case.op for case in OpInfoSource(max_samples=1).cases(["aten::upsample_nearest2d"])}
    assert "nn.functional.interpolate.nearest" in names
    assert not {"nn.functional.interpolate.bicubic", "nn.functional.interpolate.area"} & names


def test_loading_op_db_keeps_the_hypothesis_profile() -> None:
    """torch's common_utils loads its own hypothesis profile on first import (a fresh process)."""
    import subprocess
    import sys

    script = ("from hypothesis import settings; settings.register_profile('mine', max_examples=3); "
              "settings.load_profile('mine'); from mluverify.plugins.opinfo_cases import OpInfoSource; "
              "OpInfoSource().entries(['aten::relu']); print(settings.get_current_profile_name())")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["mine"]


@pytest.mark.parametrize("name", ["add", "nn.functional.conv2d", "softmax", "index_put", "nn.functional.dropout"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_opinfo_samples_are_sample_inputs_without_the_stack_walk(name: str, requires_grad: bool) -> None:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._pytree import tree_leaves

    from mluverify.plugins.opinfo_cases import opinfo_samples

    info = next(entry for entry in op_db if entry.name == name and not entry.variant_test_name)
    torch.manual_seed(3)
    expected = list(info.sample_inputs("cpu", torch.float32, requires_grad=requires_grad))
    torch.manual_seed(3)
    actual = list(opinfo_samples(info, torch.float32, requires_grad))
    assert len(actual) == len(expected) > 0
    for got, want in zip(actual, expected):
        got_leaves, want_leaves = (tree_leaves((s.input, s.args, s.kwargs)) for s in (got, want))
        assert [type(leaf) for leaf in got_leaves] == [type(leaf) for leaf in want_leaves]
        for leaf, wanted in zip(got_leaves, want_leaves):
            if isinstance(leaf, torch.Tensor):
                torch.testing.assert_close(leaf, wanted, rtol=0, atol=0, equal_nan=True)
            else:
                assert leaf == wanted
