"""Coverage that steers: a campaign counts what it judged per target, op and dtype into its
corpus, and draws the least judged ops and dtypes more often; --jobs shards and --merge unite it."""
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from mluverify.cli import main
from mluverify.errors import InvalidArgument
from mluverify.fuzz.coverage import COVERAGE_FILE, STEER_RANGE, Steering, count_program, read_runs, record_run
from mluverify.fuzz.program import Node, Program
from mluverify.report.fuzz_page import FUZZ_PAGE

TARGET = "planted:fused"  # the CPU, wrong only where a transpose feeds a matmul (none here)
OPS = ("relu", "neg", "abs", "sin", "cos", "exp")
RARE = ("cos", "exp")


def _campaign(corpus, seed="0", budget="40"):
    return main(["fuzz", "--target", TARGET, "--plugin", "fuzz_planted", "--ops", ",".join(OPS), "--seed", seed,
                 "--budget", budget, "--in-process", "--out", str(corpus)])


def _this_run(corpus, before=()):
    """The op counts of the campaign that wrote ``corpus``'s coverage entry not in ``before``."""
    (run,) = set(read_runs(corpus)) - set(before)
    counts = Counter()
    for (op, _), n in read_runs(corpus)[run][TARGET].items():
        counts[op] += n
    return counts


def test_draws_favour_the_ops_judged_least_and_differ_from_an_empty_coverage(tmp_path):
    steered, unsteered = tmp_path / "steered", tmp_path / "empty"
    record_run(steered, "earlier", {TARGET: Counter({(op, "float32"): 1000 for op in OPS if op not in RARE})})
    assert _campaign(steered) == 0 and _campaign(unsteered) == 0
    with_coverage, without = _this_run(steered, ["earlier"]), _this_run(unsteered)
    share = {name: sum(c[op] for op in RARE) / sum(c.values()) for name, c in
             (("steered", with_coverage), ("empty", without))}
    # Two of six ops: a third of the draws unsteered; weighted STEER_RANGE : 1 against the others.
    assert share["steered"] > 0.6, (share, with_coverage)
    assert share["empty"] < 0.45, (share, without)
    assert all(with_coverage[op] > with_coverage[other] for op in RARE for other in OPS if other not in RARE)
    # The corpus keeps both campaigns' entries; the next campaign starts from their sum.
    assert set(read_runs(steered)) >= {"earlier"} and len(read_runs(steered)) == 2
    # Its page shows the coverage per target, ops never judged first.
    page = (unsteered / FUZZ_PAGE).read_text()
    table = json.loads(re.search(r'id="fuzz-coverage"><script type="application/json" class="mv-data">(.*?)</script>',
                                 page).group(1))
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert int(rows[0]["judged"]) == 0 and rows[0]["dtype"] == "-" and rows[0]["target"] == TARGET
    assert {(r["op"], int(r["judged"])) for r in rows if r["dtype"] == "float32"} == {(op, without[op]) for op in OPS}


def test_equal_counts_draw_as_unsteered_and_unequal_ones_weight_by_the_least():
    steering = Steering({("relu", "float32"): 99})
    assert steering.weighted(["a", "b"], [1, 2], [5, 5]) == ["a", "b", "b"]
    assert steering.weighted(["a", "b"], [1, 1], [0, 99]) == ["a"] * STEER_RANGE + ["b"]
    # Cast dtypes: the ones never judged as an operand are drawn STEER_RANGE times as often.
    assert steering.dtypes(["float32", "float16"]) == ["float32"] + ["float16"] * STEER_RANGE


def test_each_node_counts_by_its_op_and_its_operands_dtype():
    program = Program(((2, 3),), (Node("to_int", ("x0",), {"dtype": "int16", "scale": 10.0, "lo": -32768.0,
                                                           "hi": 32767.0}),
                                  Node("neg", ("v0",)), Node("relu", ("x0",))))
    counts = Counter()
    count_program(counts, program)
    assert counts == Counter({("to_int", "float32"): 1, ("neg", "int16"): 1, ("relu", "float32"): 1})


@pytest.mark.heavy  # four campaign processes, each shrinking its finding
def test_jobs_give_the_findings_and_coverage_of_the_same_shards_run_one_after_the_other(tmp_path, capsys):
    common = ["fuzz", "--target", TARGET, "--plugin", "fuzz_planted", "--ops", "transpose,matmul", "--in-process"]
    assert main([*common, "--seed", "0", "--budget", "12", "--jobs", "2", "--out", str(tmp_path / "jobs")]) == 1
    out = capsys.readouterr().out
    assert "--seed 0 --budget 6" in out and "--seed 1000000 --budget 6" in out
    # The same shards, one after the other, each a process as a user (or a CI job) runs it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    shards = [tmp_path / "shard-0", tmp_path / "shard-1"]
    for shard, seed in zip(shards, ("0", "1000000")):
        subprocess.run([sys.executable, "-m", "mluverify.cli", *common, "--seed", seed, "--budget", "6",
                        "--out", str(shard)], env=env, check=False, capture_output=True)
    assert main(["fuzz", "--merge", *map(str, shards), "--out", str(tmp_path / "sequential")]) == 0
    jobs, sequential = tmp_path / "jobs", tmp_path / "sequential"
    found = sorted(p.name for p in jobs.glob("*.json"))
    assert found and found == sorted(p.name for p in sequential.glob("*.json"))
    assert all(_kept(jobs / name) == _kept(sequential / name) for name in found)
    assert sorted(map(_totals, read_runs(jobs).values())) == sorted(map(_totals, read_runs(sequential).values()))


def _kept(path):
    """A finding's file but its reproducer line (which names the corpus it is in)."""
    data = json.loads(path.read_text())
    return {key: value for key, value in data.items() if key != "reproducer"}


def _totals(coverage):
    return sorted((target, sorted(counts.items())) for target, counts in coverage.items())


def test_an_unreadable_coverage_file_is_named(tmp_path, capsys):
    (tmp_path / COVERAGE_FILE).parent.mkdir()
    (tmp_path / COVERAGE_FILE).write_text("{not json")
    with pytest.raises(InvalidArgument, match="coverage file .*coverage.json: unreadable"):
        read_runs(tmp_path)
    assert _campaign(tmp_path, budget="1") == 2
    assert "move it away to start the corpus's coverage afresh" in capsys.readouterr().err
