"""``executorch:xnnpack`` (issue 37): ExecuTorch with the XNNPACK delegate. A small program and a
small network run end to end through the pytest front end, each record saying what XNNPACK took
and what the portable kernels ran; a wrong lowering planted through the back end's own hook
point (an edge-dialect transform pass) is caught by the judge; what it cannot do is refused.

Skipped with the install line where executorch is not installed (the extra is out of the default
install); under ``CI=true`` an installed executorch that cannot run fails.
"""
from __future__ import annotations

import importlib.util
import os
from importlib.metadata import version

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify import compare
from mluverify.core.case import Case, Target
from mluverify.plugins.executorch_backend import ExecuTorchBackend, Partitioning
from tests.backends.test_real_compilers import PROGRAM_ARGS, program
from tests.backends.test_real_compilers import SUITE as REAL_SUITE

TARGET = "executorch:xnnpack"
CASE = Case(f"t.py::test_program[{TARGET}]", "program", Target.parse(TARGET))


def _require() -> None:
    reason = ExecuTorchBackend().unavailable_reason()
    if reason and importlib.util.find_spec("executorch") and os.environ.get("CI") == "true":
        pytest.fail(f"{TARGET} is installed but cannot run: {reason}")
    if reason:
        pytest.skip(f"{TARGET} unavailable: {reason}")


# the program and the small CNN the other real compilers run, and cases that show what XNNPACK takes
SUITE = REAL_SUITE + """
def test_mlp(verify):
    torch.manual_seed(2)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    verify(mlp, torch.randn(5, 6), op="mlp")

def test_matmul(verify):
    verify(torch.mm, torch.linspace(-2, 2, 24).reshape(4, 6), torch.linspace(1, -1, 30).reshape(6, 5), op="mm")

def test_grad(verify):
    verify(torch.nn.Linear(4, 2), torch.randn(3, 4), op="linear", grad=True)
"""


@pytest.mark.slow
def test_executorch_runs_a_program_and_a_network_end_to_end(pytester):
    _require()
    pytester.makepyfile(test_et=SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-target={TARGET}", "-rs", "-p", "no:cacheprovider",
                                           f"--mlu-report={run}")
    records = pd.read_parquet(run / "records.parquet")
    records = records[records["kind"] == "output"].set_index("case_id")
    prefix = "test_et.py::test_"
    assert records["status"].to_dict() == {
        f"{prefix}program[{TARGET}]": "passed",
        f"{prefix}network[{TARGET}-float32]": "passed",
        f"{prefix}network[{TARGET}-float16]": "passed",
        f"{prefix}mlp[{TARGET}]": "passed",
        # a single op the partitioner left to the portable kernels is not XNNPACK's result
        f"{prefix}matmul[{TARGET}]": "not_on_device"}, records["reason"]
    # what XNNPACK took: the MLP whole; the program's matmul of two inputs and its sum, the CNN's
    # adaptive pooling and the lone matmul stayed in the portable kernels, which the records name
    assert records["executed_as"].to_dict() == {
        f"{prefix}program[{TARGET}]": "partially fused", f"{prefix}network[{TARGET}-float32]": "partially fused",
        f"{prefix}network[{TARGET}-float16]": "partially fused", f"{prefix}mlp[{TARGET}]": "fused",
        f"{prefix}matmul[{TARGET}]": "layer-by-layer"}
    assert records["fallback_ops"].to_dict() == {
        f"{prefix}program[{TARGET}]": "aten::mm,aten::sum.dim_IntList",
        f"{prefix}network[{TARGET}-float32]": "aten::_adaptive_avg_pool2d",
        f"{prefix}network[{TARGET}-float16]": "aten::_adaptive_avg_pool2d", f"{prefix}mlp[{TARGET}]": "",
        f"{prefix}matmul[{TARGET}]": "aten::mm"}
    assert records.loc[f"{prefix}program[{TARGET}]", "not_fused_reason"] == (
        "2 XNNPACK partition(s); left to the portable kernels: aten::mm, aten::sum.dim_IntList")
    assert (records["compile_s"] > 0).all() and set(records["device_impl"]) == {
        f"executorch {version('executorch')} XNNPACK"}
    result.stdout.fnmatch_lines_random([f"*test_network*{TARGET}-bfloat16*: {TARGET} does not compute in bfloat16*",
                                        f"*test_grad*{TARGET}*: {TARGET} does not run backward*"])


def _relu_as_abs():
    """An edge-dialect pass that lowers relu as abs: a wrong lowering, planted where a plugin
    rewrites the program before XNNPACK takes it."""
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import ExportPass

    class ReluAsAbs(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            wrong = exir_ops.edge.aten.abs.default if op == exir_ops.edge.aten.relu.default else op
            return super().call_operator(wrong, args, kwargs, meta)

    return ReluAsAbs()


def test_a_planted_wrong_lowering_is_caught_and_the_clean_one_passes():
    _require()
    expected = program(*PROGRAM_ARGS)
    clean = ExecuTorchBackend().execute(program, PROGRAM_ARGS, {}, case=CASE)
    planted = ExecuTorchBackend(transform_passes=[_relu_as_abs()]).execute(program, PROGRAM_ARGS, {}, case=CASE)
    assert compare(clean.output, expected, mode="cnml").passed
    # the wrong relu ran inside XNNPACK, not in a portable kernel beside it
    assert planted.info["delegated_ops"].count("aten::abs") == 2 and "aten::relu" not in planted.info["delegated_ops"]
    verdict = compare(planted.output, expected, mode="cnml")
    assert not verdict.passed and verdict.value > 0.02, verdict


def test_how_a_lowered_program_ran_is_said_from_its_partitions():
    assert Partitioning(1, ("aten::relu",), ()).executed_as() == ("fused", "")
    assert Partitioning(0, (), ("aten::mm",)).executed_as() == (
        "layer-by-layer", "the XNNPACK partitioner delegated nothing; the portable kernels ran aten::mm")
    assert Partitioning(2, ("aten::relu",), ("aten::mm", "aten::mm")).executed_as() == (
        "partially fused", "2 XNNPACK partition(s); left to the portable kernels: aten::mm")


def test_layout_copies_left_to_the_portable_kernels_are_plumbing_not_the_op_under_test():
    # add(x, 2) leaves a dim-order copy (the scalar's dtype cast) beside the delegated add: named as
    # the ATen copy it replaces, it does not make the case's add a CPU fallback
    _require()
    case = Case(f"t.py::test_add[{TARGET}]", "add", Target.parse(TARGET))
    execution = ExecuTorchBackend().execute(torch.add, (torch.linspace(-1, 1, 5), 2), {}, case=case)
    assert execution.fallback_ops == ("aten::_to_copy",) and execution.info["delegated_ops"] == ("aten::add.Tensor",)
    assert torch.equal(execution.output, torch.linspace(-1, 1, 5) + 2)


def test_refuses_bfloat16_backward_and_quantization_with_the_reason():
    backend, module = ExecuTorchBackend(), torch.nn.Linear(4, 2)
    assert backend.refusal(module, CASE) is None
    assert "does not run backward" in backend.refusal(module, CASE, grad=True)
    bf16 = Case("t", "linear", Target.parse(TARGET), dtype="bfloat16")
    assert backend.refusal(module, bf16).startswith(f"{TARGET} does not compute in bfloat16: the XNNPACK delegate")
    int8 = Case("t", "linear", Target.parse(TARGET), quant="int8")
    assert "quantizes nothing" in backend.refusal(module, int8)


def test_without_its_package_the_target_names_the_install_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "executorch" else real(name, *a))
    assert ExecuTorchBackend().unavailable_reason() == "executorch not installed (pip install 'mluverify[executorch]')"
