"""Across machines: pytest-split slices balanced by the records' durations, then
`mluverify report --merge` gives the records one unsliced run gives; merging refuses what is not
one run."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

SUITE = """
import pytest, torch

@pytest.mark.parametrize("n", range(12))
def test_softmax(verify, n):
    x = torch.randn(64, generator=torch.Generator().manual_seed(n))
    verify(torch.softmax, x, 0, op="softmax", seed=n)
    verify(torch.tanh, x, op="tanh", seed=n)  # a second case of the same test: `#2`
"""

COMPARED = ["case_id", "op", "target", "value", "bound", "passed", "rel_mse", "max_abs", "seed", "status"]


def cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "mluverify.cli", *args)


def records(path):
    return pq.read_table(path / "records.parquet").to_pandas()[COMPARED].sort_values("case_id").reset_index(drop=True)


def _run(directory: Path, *argv: str) -> None:
    """``argv`` in ``directory`` as a fresh process, outside this test session (no xdist worker
    variables, no PYTEST_ADDOPTS); fails naming the command and its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MLUVERIFY_"))}
    done = subprocess.run([sys.executable, *argv], cwd=directory, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def _pytest_run(directory: Path, report: str, *args: str) -> None:
    _run(directory, "-m", "pytest", "-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=cpu64:eager",
         f"--mlu-report={directory / report}", *args)


@pytest.fixture(scope="module")
def built_slices(tmp_path_factory) -> Path:
    """One unsliced run, its durations, and three pytest-split slices balanced by them (built
    once: the tests only read them, or change a copy)."""
    directory = tmp_path_factory.mktemp("slices")
    (directory / "test_softmax.py").write_text(SUITE)
    _pytest_run(directory, "full")
    _run(directory, "-m", "mluverify.cli", "durations", "full", "--out", ".test_durations")
    for group in (1, 2, 3):
        _pytest_run(directory, f"slice-{group}", "--splits", "3", "--group", str(group),
                    "--durations-path", ".test_durations", "--splitting-algorithm", "least_duration")
    return directory


@pytest.fixture
def slices(pytester, built_slices):
    """A copy of the runs in this test's own directory."""
    shutil.copytree(built_slices, pytester.path, dirs_exist_ok=True)
    return pytester


def test_durations_are_per_test_from_the_records(slices):
    durations = json.loads((slices.path / ".test_durations").read_text())
    full = pq.read_table(slices.path / "full" / "records.parquet").to_pandas()
    assert sorted(durations) == sorted(f"test_softmax.py::test_softmax[cpu64:eager-{n}]" for n in range(12))
    first = "test_softmax.py::test_softmax[cpu64:eager-0]"
    both_cases = full[full["case_id"].isin([first, first + "#2"])]["duration_s"].sum()
    assert durations[first] == pytest.approx(both_cases, abs=1e-6)


def test_three_slices_merged_are_the_unsliced_run(slices):
    parts = [records(slices.path / f"slice-{group}") for group in (1, 2, 3)]
    assert all(len(part) for part in parts)  # each machine did a share
    assert sum(len(part) for part in parts) == 24
    result = cli(slices, "report", "--merge", "slice-1", "slice-2", "slice-3", "--out", "merged",
                 "--baseline", "full", "--gate")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*merged 3 runs into merged*", "*mluverify gate: passed*"])
    pandas.testing.assert_frame_equal(records(slices.path / "merged"), records(slices.path / "full"))
    merged_from = json.loads((slices.path / "merged" / "run.json").read_text())["merged_from"]
    assert [part["run_dir"] for part in merged_from] == ["slice-1", "slice-2", "slice-3"]


def test_a_slice_left_out_of_the_merge_fails_the_gate_as_missing(slices):
    result = cli(slices, "report", "--merge", "slice-1", "slice-2", "--out", "merged", "--baseline", "full", "--gate")
    assert result.ret == 1
    missing = len(records(slices.path / "slice-3"))
    result.stdout.fnmatch_lines([f"*FAILED ({missing} blocking findings)*", "*| missing |*"])


def test_overlapping_runs_are_refused_naming_a_case(slices):
    result = cli(slices, "report", "--merge", "slice-1", "full", "--out", "merged")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["*case id(s) are in more than one run, e.g. 'test_softmax.py::*' in slice-1 and full*"])
    assert not (slices.path / "merged").exists()


def test_runs_of_different_versions_are_refused(slices):
    meta_path = slices.path / "slice-2" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "torch_version": "2.0.0"}))
    result = cli(slices, "report", "--merge", "slice-1", "slice-2", "slice-3", "--out", "merged")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["*cannot merge runs of different torch_version (slice-1: 2.*, slice-2: 2.0.0, *"])
