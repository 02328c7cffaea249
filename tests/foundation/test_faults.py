"""Faults injected into real runs (subprocesses): SIGKILL and SIGINT mid-run, a full disk (a real
file-size limit, RLIMIT_FSIZE), read-only report and dump directories, two runs into one
directory at once. No record is lost, no report is left half-written, every message is clear."""
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

from mluverify.errors import InvalidArgument

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

# Test n verifies one case (seed n). With BLOCK_AT=k, test k first says so (the REACHED file)
# and then waits for the GO file: the run is caught with exactly k records written.
SUITE = """
import os, pathlib, time
import pytest, torch

@pytest.mark.parametrize("n", range({count}))
def test_add(verify, n):
    if os.environ.get("BLOCK_AT") == str(n):
        pathlib.Path(os.environ["REACHED"]).write_text("reached")
        while not pathlib.Path(os.environ["GO"]).exists():
            time.sleep(0.1)
    verify(torch.add, torch.ones(64), torch.full((64,), float(n)), op="add", seed=n)
"""
WAIT_S = 300


def pytest_argv(project: Path, *args):
    return [sys.executable, "-m", "pytest", "-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=cpu64:eager",
            f"--mlu-report={project / 'run'}", *args]


def records(run_dir):
    return pq.read_table(run_dir / "records.parquet").to_pandas()


def shard_lines(run_dir):
    return sum(path.read_bytes().count(b"\n") for path in (run_dir / "shards").glob("*.jsonl"))


def cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "mluverify.cli", *args)


@contextlib.contextmanager
def blocked_run(pytester, block_at, *args):
    """A run started in the background, held inside test ``block_at`` (``block_at`` records
    written); yields the process, lets it go on leaving the block."""
    reached, go = pytester.path / "reached", pytester.path / "go"
    reached.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    env = dict(os.environ, BLOCK_AT=str(block_at), REACHED=str(reached), GO=str(go))
    # SIGINT back to its default in the run: a shell without job control starts background
    # jobs with SIGINT ignored, and Python keeps an ignored SIGINT (no KeyboardInterrupt).
    process = subprocess.Popen(pytest_argv(pytester.path, *args), cwd=pytester.path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + WAIT_S
        while not reached.exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the run never reached the blocking test"
            time.sleep(0.2)
        yield process
    finally:
        go.write_text("go")
        if process.poll() is None:
            process.wait(WAIT_S)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A project whose finished run of 6 records is ``run``, built once per module (the tests
    change copies of it)."""
    project = tmp_path_factory.mktemp("previous")
    (project / "test_add.py").write_text(SUITE.format(count=6))
    subprocess.run(pytest_argv(project), cwd=project, check=True, stdout=subprocess.DEVNULL)
    assert len(records(project / "run")) == 6
    return project


@pytest.fixture
def previous(pytester, finished_run):
    """A finished run of 6 records in ``run``: what a failed next run must leave as it was."""
    shutil.copytree(finished_run, pytester.path, dirs_exist_ok=True)
    return pytester


def test_sigkill_mid_run_keeps_the_previous_run_and_every_record(previous):
    pytester = previous
    with blocked_run(pytester, 3) as process:
        process.kill()
        process.wait(WAIT_S)
    run, staging = pytester.path / "run", pytester.path / "run.running"
    assert len(records(run)) == 6 and sorted(records(run)["seed"]) == list(range(6))  # untouched
    assert shard_lines(staging) == 3  # tests 0, 1, 2: every record written before the kill
    # the next run sets the killed one aside, says where, and replaces the previous one
    result = pytester.run(*pytest_argv(pytester.path))
    assert result.ret == 0
    kept = next(pytester.path.glob("run.interrupted-*"))
    result.stdout.fnmatch_lines([f"*the records of a run that did not finish (killed: *) were kept in {kept}*"])
    assert len(records(pytester.path / "run.prev")) == 6 and len(records(run)) == 6
    # reported, the killed run says it is incomplete everywhere and claims no pass
    reported = cli(pytester, "report", str(kept))
    assert reported.ret == 1
    reported.stdout.fnmatch_lines(["mluverify: incomplete: 3 of 6 tests (killed: *); no recorded comparison failed;*"])
    assert sorted(records(kept)["seed"]) == [0, 1, 2]
    assert_reported_incomplete(kept, "incomplete: 3 of 6 tests (killed")
    assert "finished" not in json.loads((kept / "run.json").read_text())  # no made-up end
    assert cli(pytester, "report", str(kept), "--allow-incomplete").ret == 0


def assert_reported_incomplete(run, headline):
    """run.json, summary.md and report.html all say the run is incomplete; none says it passed."""
    metadata = json.loads((run / "run.json").read_text())
    assert metadata["complete"] is False
    summary, page = (run / "summary.md").read_text(), (run / "report.html").read_text()
    assert headline in summary and headline in page
    assert "all comparisons passed" not in summary + page
    assert '<div class="mv-banner warn" id="banner">' in page or '<div class="mv-banner bad" id="banner">' in page


def test_sigint_mid_run_reports_what_ran_and_is_no_baseline(previous):
    pytester = previous
    with blocked_run(pytester, 3) as process:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=WAIT_S)[0]
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    run = pytester.path / "run"
    assert sorted(records(run)["seed"]) == [0, 1, 2]  # merged and reported
    assert (run / "report.html").exists() and not list(run.glob("*.tmp-*"))
    assert len(records(pytester.path / "run.prev")) == 6  # the previous run is kept
    assert_reported_incomplete(run, "incomplete: 3 of 6 tests (interrupted")
    refused = cli(pytester, "baseline", "update", "--from", str(run), "--to", str(pytester.path / "base"))
    assert refused.ret == 2
    refused.stderr.fnmatch_lines(["*run is incomplete: 3 of 6 tests (interrupted*--allow-incomplete*"])
    taken = cli(pytester, "baseline", "update", "--from", str(run), "--to", str(pytester.path / "base"),
                "--allow-incomplete")
    assert taken.ret == 0


def test_an_interrupted_gated_run_fails_its_gate_and_says_why(previous):
    pytester = previous
    with blocked_run(pytester, 2, "--mlu-gate") as process:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=WAIT_S)[0]
    assert "gate: FAILED" in output and "incomplete run" in output, output
    gate = (pytester.path / "run" / "gate.md").read_text()
    assert gate.startswith("# mluverify gate: FAILED") and "incomplete: 2 of 6 tests (interrupted" in gate


def test_a_run_stopped_by_x_is_incomplete(pytester):
    pytester.makepyfile(test_stops="""
import torch

def test_a_fails_first(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
    assert False

def test_b(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")

def test_c(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
""")
    result = pytester.run(*pytest_argv(pytester.path, "-x"))
    assert result.ret == 1
    metadata = json.loads((pytester.path / "run" / "run.json").read_text())
    assert (metadata["complete"], metadata["tests_run"], metadata["tests_collected"]) == (False, 1, 3)
    result.stdout.fnmatch_lines(["mluverify: incomplete: 1 of 3 tests (stopped early*"])


@pytest.mark.heavy  # 20 runs; test_sigkill_mid_run_keeps_the_previous_run_and_every_record is the quick one
def test_sigkill_at_random_points_keeps_every_written_record_and_never_reads_as_passed(pytester, monkeypatch):
    """20 runs killed at a random moment: each record the run wrote before the kill (flushed
    line by line: the shard is opened unbuffered and each record is one write) is kept; the
    killed run is set aside by the next one, reported incomplete, and the next run is not
    blocked."""
    import random

    pytester.makepyfile(test_add=SUITE.format(count=40).replace(
        '    verify(torch.add', '    outcome = verify(torch.add').replace(
        'op="add", seed=n)', 'op="add", seed=n)\n    with open(os.environ["WRITTEN"], "a") as log:\n'
                             '        log.write(f"{n}\\n")\n    time.sleep(0.1)'))  # a run of 4 s or more
    written_log = pytester.path / "written.log"
    monkeypatch.setenv("WRITTEN", str(written_log))  # the killed runs and the last one alike
    chance = random.Random(20261126)
    kept_total = written_total = 0
    for attempt in range(20):
        written_log.write_text("")
        process = subprocess.Popen(pytest_argv(pytester.path), cwd=pytester.path,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()  # start-up (torch's import) takes seconds: kill after it, at random
        while not written_log.read_text() and process.poll() is None and time.monotonic() - started < WAIT_S:
            time.sleep(0.05)
        time.sleep(chance.uniform(0.0, 2.0))
        finished_first = process.poll() is not None  # on a fast machine the run may beat the kill
        process.kill()
        process.wait(WAIT_S)
        written = {int(line) for line in written_log.read_text().split()}
        if finished_first:
            assert set(records(pytester.path / "run")["seed"]) >= written
            continue
        staging = pytester.path / "run.running"
        kept = {json.loads(line)["seed"] for path in (staging / "shards").glob("*.jsonl")
                for line in path.read_text().splitlines()} if staging.exists() else set()
        assert written <= kept, f"attempt {attempt}: records written before the kill were lost"
        kept_total, written_total = kept_total + len(kept), written_total + len(written)
        if kept:
            assert json.loads((staging / "run.json").read_text())["complete"] is False
            reported = cli(pytester, "report", str(staging))
            assert reported.ret == 1
            reported.stdout.fnmatch_lines(["mluverify: incomplete: * of 40 tests (killed*"])
    print(f"SIGKILL loop: {kept_total} records kept, {written_total} confirmed written before the kill")
    assert written_total > 0
    result = pytester.run(*pytest_argv(pytester.path))  # not blocked by any of them
    assert result.ret == 0 and len(records(pytester.path / "run")) == 40


def limit_file_size(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_loses_no_record_and_replaces_nothing(previous):
    pytester = previous
    pytester.makepyfile(test_add=SUITE.format(count=40))
    limit = 24 * 1024  # room for some records, not for all (one is about a kilobyte)
    process = subprocess.run(pytest_argv(pytester.path, "-q"), cwd=pytester.path, capture_output=True, text=True,
                             preexec_fn=limit_file_size(limit), timeout=WAIT_S)
    out = process.stdout + process.stderr
    assert process.returncode == 1, out
    assert "File too large" in out and "records written before are kept" in out
    assert "INTERNALERROR" not in out
    staging = pytester.path / "run.running"
    assert f"every record written is kept in {staging}" in out
    assert len(records(pytester.path / "run")) == 6  # the previous run is untouched
    assert not list(staging.glob("*.tmp-*"))  # no half-written records file
    passed = int(out.rsplit(" passed", 1)[0].rsplit(" ", 1)[-1].rsplit("\n", 1)[-1])
    assert 5 < passed < 40
    # with room again, the kept shards become the run's records: one per passed test
    assert cli(pytester, "report", str(staging)).ret == 0
    assert sorted(records(staging)["seed"]) == list(range(passed))


@contextlib.contextmanager
def read_only(path: Path):
    """``path`` and everything in it unwritable, for root too (root ignores permission bits: the
    immutable attribute stops it)."""
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"cannot make {path} immutable here: {made.stderr.strip()}")
        undo = ["chattr", "-R", "-i", str(path)]
    else:
        subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
        undo = ["chmod", "-R", "u+w", str(path)]
    try:
        yield path
    finally:
        subprocess.run(undo, check=True)


def test_a_read_only_previous_run_is_a_usage_error_not_an_internal_error(previous):
    pytester = previous
    run = pytester.path / "run"
    with read_only(run):
        result = pytester.run(*pytest_argv(pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*previous run directory {run} is read-only*chmod -R u+w*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert len(records(run)) == 6 and not (pytester.path / "run.running").exists()


def test_a_read_only_parent_and_a_read_only_run_to_report_are_named(previous):
    pytester = previous
    parent = pytester.mkdir("locked")
    with read_only(parent):
        result = pytester.run(*pytest_argv(pytester.path, f"--mlu-report={parent / 'run'}"))
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{parent}*is not writable*"])
    with read_only(pytester.path / "run"):
        result = cli(pytester, "report", "run")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["mluverify report: error: cannot write *run/*"])


def test_a_read_only_dump_directory_is_named(tmp_path):
    from mluverify.dump import Dumper

    with read_only(tmp_path):
        with pytest.raises(InvalidArgument, match=f"dump_dir '{tmp_path}/dump' is not writable"):
            with Dumper(dump_dir=tmp_path / "dump"):
                pass


def test_a_second_run_into_the_same_directory_refuses_and_the_first_finishes(previous):
    pytester = previous
    with blocked_run(pytester, 3) as first:
        second = pytester.run(*pytest_argv(pytester.path))
        assert second.ret == pytest.ExitCode.USAGE_ERROR
        second.stderr.fnmatch_lines([f"*report directory {pytester.path / 'run'} is in use by another run "
                                     f"(pid {first.pid} on *; wait for it to end or pass another --mlu-report*"])
    assert first.returncode == 0, first.stdout.read()
    assert sorted(records(pytester.path / "run")["seed"]) == list(range(6))
