"""The corpus file format: round trip, versioning, merging, and the command's bad input."""
import dataclasses
import json

import pytest
import torch

from mluverify.cli import main
from mluverify.errors import InvalidArgument
from mluverify.fuzz.corpus import VERSION, Finding, keep, load_corpus, merge, read_finding, retire, signature
from mluverify.fuzz.differential import Judgement
from mluverify.fuzz.program import Node, Program


def _finding(target="cpu:inductor", ops=("relu", "softmax")) -> Finding:
    nodes = [Node(ops[0], ("x0",))] + [Node(op, (f"v{i}",), {"dim": 0} if op == "softmax" else {})
                                       for i, op in enumerate(ops[1:])]
    program = Program(((2, 3),), tuple(nodes))
    inputs = (torch.tensor([[0.1, -2.5, 3.0], [1e-7, 2.0 / 3.0, -0.0]]),)
    return Finding(Judgement(target, "deviation", "rel_mse 0.5 > 0.02", 0.5, 1e-8, True), program, inputs, seed=7)


def test_a_finding_round_trips_bit_for_bit(tmp_path):
    written, new = keep(tmp_path, _finding())
    assert new
    read = read_finding(tmp_path / f"{written.signature}.json")
    assert read.program == written.program and read.judgement == written.judgement and read.seed == 7
    assert torch.equal(read.inputs[0], written.inputs[0])  # float32 values survive JSON exactly
    assert read.signature == signature("cpu:inductor", "deviation", ("relu", "softmax"))
    script = (tmp_path / f"{written.signature}.py").read_text()
    assert "torch.compile(fn, backend=\"inductor\"" in script and "def program_float64(x0):" in script


def test_the_standalone_script_runs_the_program(tmp_path):
    """Its CPU output is the program's: run the script's functions and compare."""
    finding, _ = keep(tmp_path, _finding())
    namespace = {}
    exec(compile((tmp_path / f"{finding.signature}.py").read_text(), "script", "exec"), namespace)
    (expected,) = finding.program.callable()(finding.inputs[0].clone())
    (got,) = namespace["program"](*namespace["INPUTS"])
    assert torch.equal(got, torch.softmax(torch.relu(finding.inputs[0]), 0)) and torch.equal(got, expected)


@pytest.mark.parametrize("edit, message", [
    (lambda data: data.update(version=VERSION + 1), f"format version {VERSION + 1}"),
    (lambda data: data.update(format="something"), "not a fuzz finding"),
    (lambda data: data["program"].update(version=0), "fuzz program format version 0"),
    (lambda data: data["program"]["nodes"][0].update(op="nope"), "unknown fuzz op 'nope'"),
])
def test_another_version_or_a_foreign_file_is_an_error_naming_it(tmp_path, edit, message):
    written, _ = keep(tmp_path, _finding())
    path = tmp_path / f"{written.signature}.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidArgument, match=message) as raised:
        read_finding(path)
    assert str(path) in str(raised.value)


def test_an_unreadable_corpus_file_is_named(tmp_path, capsys):
    (tmp_path / "broken.json").write_text("{not json")
    assert main(["fuzz", "--replay", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "broken.json" in error and "unreadable" in error


def test_a_culprit_names_the_finding_and_round_trips(tmp_path):
    blamed = dataclasses.replace(_finding(), culprit="aten::softmax")
    written, _ = keep(tmp_path, blamed)
    assert read_finding(tmp_path / f"{written.signature}.json").culprit == "aten::softmax"
    assert written.signature == signature("cpu:inductor", "deviation", ("exp",), "aten::softmax")
    assert written.signature != _finding().signature


def test_a_retired_finding_moves_to_fixed(tmp_path):
    finding, _ = keep(tmp_path, _finding())
    moved = retire(tmp_path, finding)
    assert moved == tmp_path / "fixed" / f"{finding.signature}.json"
    assert (tmp_path / "fixed" / f"{finding.signature}.py").exists()
    assert load_corpus(tmp_path) == [] and len(load_corpus(tmp_path / "fixed")) == 1


def test_the_standalone_script_exits_1_on_a_mismatch(tmp_path, monkeypatch):
    """Its ``wrong`` check: another dtype, or an error against float64 past twice the CPU's."""
    finding, _ = keep(tmp_path, _finding())
    namespace = {}
    exec((tmp_path / f"{finding.signature}.py").read_text().split('if __name__ == "__main__":')[0], namespace)
    wrong, golden = namespace["wrong"], torch.tensor([1.0, 2.0], dtype=torch.float64)
    reference = golden.float()
    assert wrong(reference, reference, golden) == ""
    assert "float16" in wrong(reference.half(), reference, golden)
    assert "rel_mse" in wrong(reference * 1.1, reference, golden)
    integers = torch.tensor([44, -119, -106], dtype=torch.int8)
    off = integers.clone()
    off[2] += 1  # rel_mse 1e-4 against the values: only exactness tells
    assert wrong(integers.clone(), integers, integers) == ""
    assert wrong(off, integers, integers) == "1 of 3 elements differ from the CPU's (exact)"
    # integers cast from floats, where the float64 run's differ from the CPU's: the golden rule
    golden_ints = integers.clone()
    golden_ints[2] += 1
    assert wrong(off, integers, golden_ints) == ""
    assert "rel_mse" in wrong(integers * 0, integers, golden_ints)


def test_the_same_finding_kept_twice_is_one_file_with_two_hits(tmp_path):
    keep(tmp_path, _finding())
    _, new = keep(tmp_path, _finding())
    (finding,) = load_corpus(tmp_path)
    assert not new and finding.hits == 2


def test_shards_merge_into_one_deduplicated_corpus(tmp_path):
    keep(tmp_path / "a", _finding())
    keep(tmp_path / "a", _finding(ops=("exp", "softmax")))
    keep(tmp_path / "b", _finding())
    assert merge([tmp_path / "a", tmp_path / "b"], tmp_path / "all") == (3, 2)
    assert main(["fuzz", "--merge", str(tmp_path / "a"), "--out", str(tmp_path / "m")]) == 0
    assert len(load_corpus(tmp_path / "m")) == 2


@pytest.mark.parametrize("argv, message", [
    (["--ops", "relu,matmull"], "unknown fuzz op or op family 'matmull'"),
    (["--budget", "0"], "budget '0' must be > 0"),
    (["--budget=-5s"], "budget '-5s' must be > 0"),
    (["--budget", "lots"], "budget 'lots'"),
    (["--merge", "x"], "--merge needs --out"),
    (["--retire-fixed"], "--retire-fixed needs --replay"),
])
def test_bad_input_exits_2_naming_it(argv, message, capsys):
    assert main(["fuzz", *argv]) == 2
    assert message in capsys.readouterr().err


def test_replay_retires_what_no_longer_fails_and_keeps_what_does(tmp_path, capsys):
    """On the planted target only a transposed matmul operand is wrong: relu -> softmax passes."""
    passing, _ = keep(tmp_path, _finding(target="planted:fused"))
    nodes = (Node("transpose", ("x0",), {"dim0": 0, "dim1": 1}), Node("matmul", ("v0", "x0")))
    failing = Finding(Judgement("planted:fused", "deviation", "planted"), Program(((3, 3),), nodes),
                      (torch.arange(9.0).reshape(3, 3),))
    keep(tmp_path, failing)
    argv = ["fuzz", "--replay", str(tmp_path), "--retire-fixed", "--plugin", "fuzz_planted", "--in-process"]
    assert main(argv) == 1
    assert "1 of 2 findings reproduce" in capsys.readouterr().out
    assert [f.signature for f in load_corpus(tmp_path)] == [failing.signature]
    assert [f.signature for f in load_corpus(tmp_path / "fixed")] == [passing.signature]
