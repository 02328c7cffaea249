"""Copy-paste reproducers: a record's reproducer, run in a shell from the project root, re-runs
that case alone (its plugins, target, core version, hypothesis example) and fails the same way;
a failing test prints it."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

# Given with -p (not a conftest: the reproducer must bring it along). Variant "B" of the back
# end is 1 % off where the input exceeds 0.5, variant "A" is exact.
SKEWED_PLUGIN = """
import torch
from mluverify import Backend, Execution, hookimpl

class Skewed(Backend):
    name = "skewed"
    modes = {"cnnl": "cnnl"}
    variants = ("A", "B")

    def execute(self, fn, args, kwargs, *, case):
        out = fn(*args, **kwargs)
        if case.core_version == "B":
            out = torch.where(args[0] > 0.5, out * 1.01, out)
        return Execution(out, ())

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Skewed())
"""

SUITE = """
import pytest, torch
from hypothesis import HealthCheck, given, settings, strategies as st

@pytest.mark.parametrize("level", [0.25, 0.75])
def test_level(verify, level):
    verify(torch.mul, torch.full((8,), level), 2.0, op="mul")

@settings(max_examples=30, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(level=st.floats(0.0, 1.0))
def test_any_level(verify, level):
    verify(torch.mul, torch.full((8,), level), 3.0, op="mul")
"""


def recorded(run_dir):
    return pq.read_table(run_dir / "records.parquet").to_pandas()


def shell(pytester, command):
    """``command`` as a user pastes it: in a shell, in the project root, with this environment's
    ``python`` first on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(command, shell=True, cwd=pytester.path, env=dict(os.environ, PATH=path),
                          capture_output=True, text=True, timeout=600)


def failing_run(pytester):
    pytester.makepyfile(skewed_plugin=SKEWED_PLUGIN, test_skewed=SUITE)
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "skewed_plugin", "--mlu-target=skewed:cnnl",
                                           "--mlu-core-version=A", "--mlu-core-version=B",
                                           f"--mlu-report={pytester.path / 'run'}")
    assert result.ret == 1
    return result, recorded(pytester.path / "run")


def test_a_recorded_reproducer_reruns_that_case_alone_and_fails_the_same_way(pytester):
    result, frame = failing_run(pytester)
    failed = frame[(frame["status"] == "failed") & frame["case_id"].str.contains("test_level")]
    assert list(failed["case_id"]) == ["test_skewed.py::test_level[skewed:cnnl-B-0.75]"]
    command = failed["reproducer"].iloc[0]
    argv = shlex.split(command)
    assert argv[:7] == ["python", "-m", "pytest", "-p", "mluverify", "-p", "skewed_plugin"]
    assert "--mlu-core-version=B" in argv and "--mlu-target=skewed:cnnl" in argv
    # the failing test prints it
    result.stdout.fnmatch_lines(["*mluverify reproducer*", command.replace("[", "?").replace("]", "?")])

    again = shell(pytester, command)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "1 failed" in again.stdout and "passed" not in again.stdout.rsplit("\n", 2)[-2]
    rerun = recorded(pytester.path / "run.repro")
    assert list(rerun["case_id"]) == list(failed["case_id"])
    assert list(rerun["value"]) == list(failed["value"])  # the same deviation, the same way
    assert len(recorded(pytester.path / "run")) == len(frame)  # the run it came from is untouched


def test_a_hypothesis_cases_reproducer_replays_exactly_its_example(pytester):
    _, frame = failing_run(pytester)
    failed = frame[(frame["status"] == "failed") & frame["case_id"].str.contains("test_any_level")]
    assert len(failed)  # levels above 0.5 fail on variant B
    case = failed.iloc[-1]
    argv = shlex.split(case["reproducer"])
    assert any(arg.startswith("--mlu-reproduce-failure=") for arg in argv)

    again = shell(pytester, case["reproducer"])
    assert again.returncode == 1, again.stdout + again.stderr
    rerun = recorded(pytester.path / "run.repro")
    assert len(rerun) == 1  # that example alone, not a new search
    assert rerun["value"].iloc[0] == case["value"] and rerun["status"].iloc[0] == "failed"


def test_plugins_the_ini_file_gives_again_are_not_repeated(pytester):
    from mluverify.pytest_plugin.reproducer import _command_line_plugins

    pytester.makeini("[pytest]\naddopts = -p pytester\n")
    config = pytester.parseconfig("-p", "no:cacheprovider", "-p", "mluverify", "-p", "no:cacheprovider")
    assert _command_line_plugins(config) == ["no:cacheprovider"]
