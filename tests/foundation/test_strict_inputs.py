"""Strict inputs: every wrong input is a usage error naming the culprit (exit 2 for the mluverify
command, pytest's 4 under pytest), never a traceback, a silent default or an emptied run."""
import sys

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pytest

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

# A back end off by an absolute DELTA (from the environment), judged by max_abs: metric values
# far below the noise floor, chosen exactly (powers of two).
OFFSET_BACKEND = """
import os
from mluverify import Backend, Execution, hookimpl

class Offset(Backend):
    name = "offset"
    modes = {"cnnl": "cnnl"}

    def execute(self, fn, args, kwargs, *, case):
        return Execution(fn(*args, **kwargs) + float(os.environ["DELTA"]), ())

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Offset())
"""

OFFSET_SUITE = """
import pytest, torch

@pytest.mark.mlu_tolerance(1.0, metric="max_abs")
def test_zeros(verify):
    verify(torch.mul, torch.zeros(4), 2.0, op="mul")
"""

PASSING_SUITE = """
import torch

def test_add(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
"""


def cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "mluverify.cli", *args)


@pytest.fixture
def offsets(pytester, monkeypatch):
    """``run(delta, report, *args)``: the offset suite gated against a baseline of delta 2**-24."""
    pytester.makeconftest(OFFSET_BACKEND)
    pytester.makepyfile(test_zeros=OFFSET_SUITE)

    def run(delta, report, *args):
        monkeypatch.setenv("DELTA", repr(delta))
        return pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=offset:cnnl",
                                             f"--mlu-report={pytester.path / report}", *args)

    assert run(2.0**-24, "base").ret == 0
    return run


def test_a_zero_noise_floor_option_is_honoured(offsets, pytester):
    baseline = f"--mlu-baseline={pytester.path / 'base'}"
    # 2**-21 is 8 x 2**-24, but both are below the configured noise floor (1e-6): no regression
    offsets(2.0**-21, "floored", baseline, "--mlu-gate").stdout.fnmatch_lines(["*mluverify gate: passed*"])
    # with the floor at 0, the same growth is a regression
    unfloored = offsets(2.0**-21, "unfloored", baseline, "--mlu-gate", "--mlu-noise-floor=0")
    assert unfloored.ret == 1
    unfloored.stdout.fnmatch_lines(["*mluverify gate: FAILED (1 blocking findings)*", "*| worsened |*"])


def test_a_zero_regress_factor_is_refused_naming_it(offsets, pytester):
    result = offsets(2.0**-24, "zero", "--mlu-regress-factor=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*command line*regress_factor = 0 must be >= 1*"])
    assert not (pytester.path / "zero").exists()


def test_report_of_a_missing_or_foreign_directory_creates_nothing(pytester):
    missing = cli(pytester, "report", "nowhere")
    assert missing.ret == 2
    missing.stderr.fnmatch_lines(["mluverify report: error: run directory nowhere does not exist"])
    assert not (pytester.path / "nowhere").exists()
    pytester.mkdir("notes").joinpath("todo.txt").write_text("keep")
    foreign = cli(pytester, "report", "notes")
    assert foreign.ret == 2
    foreign.stderr.fnmatch_lines(["*notes is not a mluverify run directory: it holds no run.json, records.parquet*"])
    assert sorted(p.name for p in (pytester.path / "notes").iterdir()) == ["todo.txt"]


def test_report_of_a_truncated_records_file_names_it(pytester):
    pytester.makepyfile(test_add=PASSING_SUITE)
    assert pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=cpu64:eager",
                                         f"--mlu-report={pytester.path / 'run'}").ret == 0
    records = pytester.path / "run" / "records.parquet"
    records.write_bytes(records.read_bytes()[: records.stat().st_size // 2])
    result = cli(pytester, "report", "run")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["mluverify report: error: run/records.parquet is not a readable parquet file*"])
    assert "Traceback" not in result.stderr.str()


def test_run_honours_the_projects_testpaths_and_refuses_missing_paths(pytester):
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["checks"]\n')
    pytester.mkdir("checks").joinpath("test_add.py").write_text(PASSING_SUITE)
    result = cli(pytester, "run", "--workers", "0", "--target", "cpu64:eager", "--report", "run")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*1 passed*"])
    missing = cli(pytester, "run", "suites", "--report", "run")
    assert missing.ret == 2
    missing.stderr.fnmatch_lines(["mluverify run: error: test path(s) not found: suites*"])


def test_a_missing_path_under_xdist_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess("-p", "mluverify", "-n", "2", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'run'}", "suites")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*file or directory not found: suites*"])


def test_baseline_update_refuses_a_run_with_failures_unless_allowed(offsets, pytester):
    assert offsets(2.0, "failing").ret == 1  # max_abs 2 > its bound 1
    refused = cli(pytester, "baseline", "update", "--from", "failing", "--to", "base2")
    assert refused.ret == 2
    refused.stderr.fnmatch_lines(["*failing has 1 failing case(s), e.g. test_zeros.py::test_zeros?offset:cnnl? "
                                  "(failed)*--allow-failures*"])
    assert not (pytester.path / "base2").exists()
    forced = cli(pytester, "baseline", "update", "--from", "failing", "--to", "base2", "--allow-failures")
    assert forced.ret == 0 and (pytester.path / "base2" / "records.parquet").exists()
