"""The gate end to end: `pytest -p mluverify --mlu-baseline DIR --mlu-gate` in subprocesses, on a
back end whose results are off by a chosen factor (so rel_mse = factor - 1, exactly)."""
import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pytest

SCALED_BACKEND = """
import os
from mluverify import Backend, Execution, hookimpl

class Scaled(Backend):
    name = "scaled"
    modes = {"cnnl": "cnnl"}

    def execute(self, fn, args, kwargs, *, case):
        return Execution(fn(*args, **kwargs) * float(os.environ["MLU_TEST_SCALE"]), ())

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Scaled())
"""

SUITE = """
import pytest, torch

@pytest.mark.parametrize("n", range(3))
def test_mul(verify, n):
    verify(torch.mul, torch.ones(4), 2.0, op="mul")
"""


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(SCALED_BACKEND)
    pytester.makepyfile(test_scaled=SUITE)
    return pytester


def run(pytester, monkeypatch, scale, report, *args):
    monkeypatch.setenv("MLU_TEST_SCALE", str(scale))
    return pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=scaled:cnnl",
                                         f"--mlu-report={pytester.path / report}", "--mlu-gate", *args)


@pytest.mark.heavy  # five runs; tests/report/test_gate.py judges the same findings in-process
def test_gate_passes_then_fails_on_worsened_missing_and_new_failures(suite, monkeypatch):
    # baseline: rel_mse 0.001 < 0.003 everywhere
    first = run(suite, monkeypatch, 1.001, "base")
    assert first.ret == 0
    first.stdout.fnmatch_lines(["*mluverify gate: passed*"])
    baseline = f"--mlu-baseline={suite.path / 'base'}"

    # 0.002 = 2 x 0.001 > 1.5 x: every case worsened, although each still passes
    worse = run(suite, monkeypatch, 1.002, "worse", baseline)
    assert worse.ret == 1
    worse.assert_outcomes(passed=3)
    worse.stdout.fnmatch_lines(["*mluverify gate: FAILED (3 blocking findings)*", "*| worsened | *test_mul*"])

    # 0.0014 = 1.4 x: within the regress factor; a -k subset is no loss: the deselected case is
    # not missing
    subset = run(suite, monkeypatch, 1.0014, "subset", baseline, "-k", "not 2")
    assert subset.ret == 0
    subset.stdout.fnmatch_lines(["*mluverify gate: passed*"])

    # ... but a case the whole suite no longer has is missing
    suite.makepyfile(test_scaled=SUITE.replace("range(3)", "range(2)"))
    missing = run(suite, monkeypatch, 1.0014, "missing", baseline)
    assert missing.ret == 1
    missing.stdout.fnmatch_lines(["*FAILED (1 blocking findings)*", "*| missing | test_scaled.py::test_mul?scaled:cnnl-2? |*"])
    suite.makepyfile(test_scaled=SUITE)

    # 0.004 > 0.003: new failures (the tests fail too)
    failing = run(suite, monkeypatch, 1.004, "failing", baseline)
    assert failing.ret == 1
    failing.stdout.fnmatch_lines(["*FAILED (3 blocking findings)*", "*| new failure | *test_mul*"])
    assert (suite.path / "failing" / "diff.md").exists() and (suite.path / "failing" / "gate.md").exists()
