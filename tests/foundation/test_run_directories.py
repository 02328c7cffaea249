"""A run directory is replaced only by a run that recorded something, built beside it and
swapped in, the previous one kept as `<dir>.prev` until the next success; help, collect-only,
start-up errors and runs that verify nothing never touch it."""
import os

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

from mluverify.errors import RecordsError
from mluverify.report.records import ShardWriter, write_metadata
from mluverify.report.rundir import RunDirectory, RunDirectoryBusy

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

SUITE = """
import pytest, torch

@pytest.mark.parametrize("n", range({count}))
def test_add(verify, n):
    verify(torch.add, torch.ones(4), torch.full((4,), float(n)), op="add", seed=n)

def test_plain():
    assert True
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=cpu64:eager",
                                         f"--mlu-report={pytester.path / 'run'}", *args)


def seeds(run_dir):
    return sorted(pq.read_table(run_dir / "records.parquet").column("seed").to_pylist())


def beside(pytester):
    return sorted(p.name for p in pytester.path.iterdir() if p.name == "run" or p.name.startswith("run."))


@pytest.mark.parametrize("args", [
    ["--help"],
    ["--collect-only"],
    ["--mlu-target=cpu64:eagr"],  # a start-up error
    ["-k", "plain"],  # runs a test, but none that verifies
    ["-k", "no_such_test"],  # collects nothing
    ["-n", "2", "-k", "plain"],  # the same under pytest-xdist
], ids=["help", "collect-only", "mistyped-target", "no-verifying-test", "nothing-collected", "xdist-no-verifying"])
def test_what_records_nothing_leaves_the_run_directory_as_it_was(pytester, args):
    pytester.makepyfile(test_add=SUITE.format(count=3))
    assert run(pytester).ret == 0
    before = {path.name: path.stat().st_mtime_ns for path in (pytester.path / "run").iterdir()}
    run(pytester, *args)
    assert {path.name: path.stat().st_mtime_ns for path in (pytester.path / "run").iterdir()} == before
    assert beside(pytester) == ["run"]  # no .running, .lock or .prev left


def test_each_success_replaces_the_run_and_keeps_the_one_before(pytester):
    pytester.makepyfile(test_add=SUITE.format(count=2))
    assert run(pytester).ret == 0
    pytester.makepyfile(test_add=SUITE.format(count=3))
    assert run(pytester).ret == 0
    assert seeds(pytester.path / "run") == [0, 1, 2] and seeds(pytester.path / "run.prev") == [0, 1]
    pytester.makepyfile(test_add=SUITE.format(count=4))
    assert run(pytester, "-n", "2").ret == 0
    assert seeds(pytester.path / "run") == [0, 1, 2, 3] and seeds(pytester.path / "run.prev") == [0, 1, 2]
    assert beside(pytester) == ["run", "run.prev"]


def a_finished_run(path, seed):
    write_metadata(path, {"run_id": f"r{seed}"})
    writer = ShardWriter(path)
    writer.write({"case_id": f"t[{seed}]", "seed": seed})
    writer.close()


def test_the_swap_exchanges_the_directories(tmp_path):
    directory = RunDirectory(tmp_path / "run")
    a_finished_run(directory.claim(), 1)
    assert directory.publish() == tmp_path / "run"
    directory.release()
    a_finished_run(directory.claim(), 2)
    directory.publish()
    directory.release()
    assert (tmp_path / "run" / "run.json").read_text().count("r2") == 1
    assert (tmp_path / "run.prev" / "run.json").read_text().count("r1") == 1
    assert sorted(os.listdir(tmp_path)) == ["run", "run.prev"]


def test_a_second_claim_is_refused_naming_the_holder(tmp_path):
    first = RunDirectory(tmp_path / "run")
    first.claim()
    with pytest.raises(RunDirectoryBusy, match=rf"report directory {tmp_path / 'run'} is in use by another run "
                                               rf"\(pid {os.getpid()} on "):
        RunDirectory(tmp_path / "run").claim()
    first.release()
    RunDirectory(tmp_path / "run").claim()  # free again


def test_a_foreign_directory_is_never_claimed(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(RecordsError, match="is not empty and holds no mluverify run"):
        RunDirectory(tmp_path / "mine").claim()
    assert sorted(os.listdir(tmp_path)) == ["mine"]


def test_a_complete_run_states_no_reason_for_being_incomplete(pytester):
    import json

    pytester.makepyfile(test_add=SUITE.format(count=2))
    assert run(pytester).ret == 0
    metadata = json.loads((pytester.path / "run" / "run.json").read_text())
    # the claim said "killed" until the end was recorded; the end replaces it, not sits beside it
    assert (metadata["complete"], metadata["tests_run"], metadata["tests_collected"]) == (True, 3, 3)
    assert "incomplete_reason" not in metadata


@pytest.mark.parametrize("ended, kept_as, said", [
    ({"complete": True, "tests_run": 1, "tests_collected": 1}, "run.unreported-r7",
     "the records of a run that finished but could not write its reports or be swapped in (a full disk, "
     "a read-only directory) were kept in {kept}"),
    ({"complete": False, "tests_collected": 3, "incomplete_reason": "killed: no end was recorded"},
     "run.interrupted-r7", "the records of a run that did not finish (killed: no end was recorded) were kept in {kept}"),
], ids=["finished-but-unwritten", "killed"])
def test_a_left_over_run_is_set_aside_saying_how_it_ended(tmp_path, ended, kept_as, said):
    staging = tmp_path / "run.running"
    staging.mkdir()
    a_finished_run(staging, 7)
    write_metadata(staging, {"run_id": "r7", **ended})
    directory = RunDirectory(tmp_path / "run")
    directory.claim()
    directory.release()
    kept = tmp_path / kept_as
    assert seeds_in_shards(kept) == [7]
    assert directory.notes == [said.format(kept=kept) + f" (`mluverify report {kept}` writes its report)"]


def seeds_in_shards(run_dir):
    import json

    return [json.loads(line)["seed"] for path in (run_dir / "shards").glob("*.jsonl") for line in path.read_text().splitlines()]
