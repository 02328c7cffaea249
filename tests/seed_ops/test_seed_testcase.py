"""Seed-style op scripts (``mluverify.testing.TestCase``): standalone and under pytest, judged by
the judge, recorded, a planted kernel bug or a CPU fallback never a pass."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

import pandas  # imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest


SEED_OPS = Path(__file__).parents[2] / "suites" / "seed_ops"
pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # subprocesses: a standalone script, test_all_operators.py, a pytest run

# add 1 % too large: three times the cnnl bound of 0.3 %
PLANTED = """
from mluverify import hookimpl

def _add_scaled(self, other, *, alpha=1):
    import torch
    return torch.ops.aten.add.Tensor(self, other, alpha=alpha) * 1.01

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::add.Tensor", _add_scaled)
"""

# bessel_j0 has no MLU kernel: it runs as a CPU fallback; the flags and infinities are misuses
EXTRA = """
import unittest
import pytest
import torch
from mluverify.testing import TestCase

@pytest.mark.mlu_targets("mlu:cnnl")
class TestChecks(TestCase):
    def test_fallback(self):
        x = torch.rand(16)
        self.assertTensorsEqual(torch.special.bessel_j0(x), torch.special.bessel_j0(x.to("mlu")).cpu(), 0.003,
                                use_MSE=True)

    def test_two_flags(self):
        x = torch.rand(4)
        self.assertTensorsEqual(x, x.to("mlu").cpu(), 0.003, use_MSE=True, use_RAE=True)

    def test_rae_without_prec(self):
        x = torch.rand(4)
        self.assertTensorsEqual(x, x.to("mlu").cpu(), use_RAE=True)

    def test_infinity(self):
        x = torch.tensor([1.0, float("inf")])
        self.assertTensorsEqual(torch.exp(x), torch.exp(x.to("mlu")).cpu(), 0.003, use_MSE=True)

    def test_infinity_allowed(self):
        x = torch.tensor([1.0, float("inf")])
        self.assertTensorsEqual(torch.exp(x), torch.exp(x.to("mlu")).cpu(), 0.003, use_MSE=True, allow_inf=True)

    def test_core_version_the_script_sets(self):
        from mluverify.device import mlu_model
        mlu_model.set_core_version("MLU370")
        x = torch.randn(32)
        self.assertTensorsEqual(torch.relu(x), torch.relu(x.to("mlu")).cpu(), 0.003, use_MSE=True)

    def test_policy_bound(self):
        x = torch.randn(32)
        self.assertTensorsEqual(torch.relu(x), torch.relu(x.to("mlu")).cpu())

@pytest.mark.mlu_targets("mlu:cnml")
class TestFused(TestCase):
    def test_policy_bound(self):
        x = torch.randn(32)
        traced = torch.jit.trace(torch.nn.ReLU(), x).to("mlu")  # the seeds' CNML flow: fused on mlu
        self.assertTensorsEqual(torch.relu(x), traced(x.to("mlu")).cpu())

    def test_eager(self):
        x = torch.randn(32)
        self.assertTensorsEqual(torch.relu(x), torch.relu(x.to("mlu")).cpu(), 0.02, use_MSE=True)
"""


# a script whose test compares the wrong pair: sub against add
SUB_WRONG = """
import unittest
import torch
from mluverify.testing import TestCase

class TestSubOp(TestCase):
    def test_sub(self):
        x, y = torch.randn(8), torch.randn(8)
        self.assertTensorsEqual(torch.sub(x, y), torch.add(x.to("mlu"), y.to("mlu")).cpu(), 0.003, use_MSE=True)
"""


def _entry_point_site(tmp_path: Path) -> Path:
    """A directory that, on PYTHONPATH, installs the planted plugin as an entry-point plugin."""
    site = tmp_path / "site"
    (site / "planted_add-1.0.dist-info").mkdir(parents=True)
    (site / "planted_add-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: planted-add\nVersion: 1.0\n")
    (site / "planted_add-1.0.dist-info" / "entry_points.txt").write_text("[mluverify]\nplanted_add = planted_add\n")
    (site / "planted_add.py").write_text(PLANTED)
    return site


def _python(script: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "MLUVERIFY_TARGET": "mlu:cnnl", **env}, timeout=300)


def test_a_planted_add_fails_the_standalone_script_and_is_recorded(tmp_path):
    report = tmp_path / "report"
    ran = _python(SEED_OPS / "test_add.py", tmp_path, PYTHONPATH=str(_entry_point_site(tmp_path)),
                  MLUVERIFY_REPORT=str(report))
    assert ran.returncode != 0, ran.stderr
    assert "FAILED (failures=1)" in ran.stderr  # test_add; add_.Scalar (the in-place test) is not planted
    assert "add on mlu:cnnl/MLU270 (float32): Mismatch: rel_mse 0.01 > bound 0.003" in ran.stderr
    frame = pandas.concat(pandas.read_json(shard, lines=True) for shard in report.rglob("records-*.jsonl"))
    frame = frame.set_index("case_id")
    assert set(frame.op) == {"add"} and set(frame.target) == {"mlu:cnnl"} and set(frame.bound) == {0.003}
    failed = frame.loc["suites/seed_ops/test_add.py::TestAddOp::test_add[mlu:cnnl-MLU270]"]  # its first shape
    assert failed.status == "failed" and failed.value > 0.003 and failed.metric == "rel_mse"
    assert frame.loc["suites/seed_ops/test_add.py::TestAddOp::test_add_scalar_inplace[mlu:cnnl-MLU270]"].status == "passed"
    assert len(frame) == 2


def test_test_all_operators_runs_every_script_beside_it_and_skips_the_not_test_ones(tmp_path):
    """The suite's runner over a directory of three scripts (copies), one failing: the exit status
    says so, every test of every script ran."""
    for name in ("test_all_operators.py", "test_add.py", "test_relu.py"):
        shutil.copy(SEED_OPS / name, tmp_path / name)
    (tmp_path / "test_sub.py").write_text(SUB_WRONG)
    ran = _python(tmp_path / "test_all_operators.py", tmp_path)
    assert ran.returncode == 1, ran.stderr
    for test in ("test_add.TestAddOp.test_add", "test_add.TestAddOp.test_add_scalar_inplace",
                 "test_relu.TestReluOp.test_relu", "test_relu.TestReluOp.test_relu_half"):
        assert f"({test}) ... ok" in ran.stderr
    assert "(test_relu.TestReluOp.test_relu_large) ... skipped 'not test'" in ran.stderr
    assert "(test_sub.TestSubOp.test_sub) ... FAIL" in ran.stderr
    assert "FAILED (failures=1, skipped=1)" in ran.stderr


def test_under_pytest_each_method_runs_per_target_judged_recorded_and_never_a_false_pass(pytester):
    """Copies of two seed scripts (add planted) and the checks above: one item per method and
    target, a record per comparison, the planted add and the fallback failing, misuses named."""
    for name in ("test_add.py", "test_relu.py"):
        shutil.copy(SEED_OPS / name, pytester.path / name)
    pytester.makepyfile(test_checks=EXTRA, planted_add=PLANTED)
    # the golden policy needs a float64 run of a callable; a seed test computed its own pair
    pytester.makepyprojecttoml('[tool.mluverify.tolerances]\nchecks = "golden"\n')
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "planted_add", "-p", "no:cacheprovider",
                                           f"--mlu-report={pytester.path / 'run'}", "--mlu-target=mlu:cnnl",
                                           "--mlu-target=mlu:cnml", "--mlu-core-version=MLU270", "-rA")
    result.stdout.fnmatch_lines_random([
        "FAILED test_add.py::TestAddOp::test_add[[]mlu:cnnl-MLU270[]] - Failed: add on mlu*",
        "*add on mlu:cnnl/MLU270 (float32): Mismatch: rel_mse 0.01 > bound 0.003 (assertTensorsEqual)",
        "PASSED test_relu.py::TestReluOp::test_relu_half[[]mlu:cnnl-MLU270[]]",
        "SKIPPED [[]1[]] test_relu.py:*: not test",
        "FAILED test_checks.py::TestChecks::test_fallback[[]mlu:cnnl-MLU270[]]*",
        "*checks on mlu:cnnl/MLU270 (float32): not_on_device: *special_bessel_j0*",
        "*use_MSE=True and use_RAE=True: set at most one of use_MSE, use_RAE, use_RMA",
        "*assertTensorsEqual(use_RAE=True) without prec*",
        "*checks on mlu:cnnl: infinite values in a (cpu) and b (device); pass allow_inf=True*",
        "*checks on mlu:cnml/MLU270 (float32): not_fused: *no fused program ran since the previous comparison*",
    ])
    # mlu_targets: add, relu and TestChecks on mlu:cnnl, TestFused on mlu:cnml
    result.assert_outcomes(passed=7, failed=6, skipped=1)
    frame = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().set_index("case_id")
    add = frame.loc["test_add.py::TestAddOp::test_add[mlu:cnnl-MLU270]"]
    assert (add.op, add.target, add.bound, add.metric, add.status) == ("add", "mlu:cnnl", 0.003, "rel_mse", "failed")
    assert add.tolerance_source == "assertTensorsEqual" and add.value > 0.003 and add.seed == 0
    relu = frame.loc["test_relu.py::TestReluOp::test_relu_half[mlu:cnnl-MLU270]"]
    assert (relu.op, relu["dtype"], relu.status, relu.core_version) == ("relu", "float16", "passed", "MLU270")
    assert not frame.index.str.contains("test_relu_large").any()  # skipped: never judged
    assert relu.device_impl == "emulator" and relu.core_number >= 1 and relu.executed_as == "device"
    # the record says what ran: the core version the script set, not the one the test started on
    assert frame.loc["test_checks.py::TestChecks::test_core_version_the_script_sets[mlu:cnnl-MLU270]"].core_version \
        == "MLU370"
    fallback = frame.loc["test_checks.py::TestChecks::test_fallback[mlu:cnnl-MLU270]"]
    assert fallback.status == "not_on_device" and "special_bessel_j0" in fallback.fallback_ops
    assert frame.loc["test_checks.py::TestChecks::test_infinity[mlu:cnnl-MLU270]"].status == "errored"
    assert frame.loc["test_checks.py::TestChecks::test_infinity_allowed[mlu:cnnl-MLU270]"].status == "passed"
    cnnl = frame.loc["test_checks.py::TestChecks::test_policy_bound[mlu:cnnl-MLU270]"]
    cnml = frame.loc["test_checks.py::TestFused::test_policy_bound[mlu:cnml-MLU270]"]
    assert (cnnl.bound, cnnl.tolerance_source, cnnl.status) == (0.003, "policy:cnnl", "passed")
    assert "golden reference unavailable (the test computed the pair); judged by policy:cnnl instead" in cnnl.reason
    assert (cnml.bound, cnml.tolerance_source, cnml.executed_as, cnml.status) == (0.02, "policy:cnml", "fused", "passed")
    # on mlu:cnml an eager comparison is no fused result, whatever its value
    eager = frame.loc["test_checks.py::TestFused::test_eager[mlu:cnml-MLU270]"]
    assert (eager.executed_as, eager.status, bool(eager.passed)) == ("layer-by-layer", "not_fused", True)


@pytest.mark.parametrize("variable, value, message", [
    ("MLUVERIFY_TARGET", "mlu:cnnx", r"\$MLUVERIFY_TARGET=mlu:cnnx: unknown target 'mlu:cnnx'; valid: .*'mlu:cnnl'"),
    ("MLUVERIFY_CORE_VERSION", "MLU999", r"\$MLUVERIFY_CORE_VERSION=MLU999: unknown variant .*'MLU999'; valid: 'MLU270'"),
    ("MLUVERIFY_TARGET", "cpu:inductor", r"run on mlu:cnnl, mlu:cnml, not cpu:inductor"),
])
def test_a_standalone_run_names_a_bad_setting_of_the_environment(monkeypatch, variable, value, message):
    from mluverify import testing
    from mluverify.errors import InvalidArgument

    class TestNothing(testing.TestCase):
        def test_nothing(self):
            """Never reached: the run cannot start."""

    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidArgument, match=message):
        TestNothing("test_nothing").run(unittest.TestResult())


def test_an_mlu_targets_marker_keeps_the_targets_it_names(pytester):
    pytester.makepyfile(test_marked="""
        import pytest
        import torch
        from mluverify.testing import TestCase

        pytestmark = pytest.mark.mlu_targets("mlu:cnnl")

        class TestMarked(TestCase):
            def test_neg(self):
                x = torch.randn(8)
                self.assertTensorsEqual(torch.neg(x), torch.neg(x.to("mlu")).cpu(), 0.003, use_MSE=True)

        @pytest.mark.mlu_targets("cpu:inductor")
        class TestNowhere(TestCase):
            def test_neg(self):
                raise AssertionError("never run: no requested target is named")

        @pytest.mark.mlu_targets("cpu64:eager")  # the same rule parametrizes verify's tests
        def test_verified(verify):
            verify(torch.neg, torch.randn(8))
    """)
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "-v", "-rs",
                                           f"--mlu-report={pytester.path / 'run'}", "--mlu-target=mlu:cnnl",
                                           "--mlu-target=mlu:cnml", "--mlu-target=cpu64:eager",
                                           "--mlu-core-version=MLU270")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*TestMarked::test_neg[[]mlu:cnnl-MLU270[]] PASSED*",
                                 "*TestNowhere::test_neg[[]no-target[]] SKIPPED*",
                                 "*test_verified[[]cpu64:eager[]] PASSED*"])
