"""Shrinking and deduplication on a planted bug (``fuzz_planted``: a matmul whose first operand
is a transposed view is 1.5x too large on target ``planted:fused``)."""
import pytest
import torch

from mluverify.fuzz.campaign import Budget, Campaign
from mluverify.fuzz.corpus import Finding, keep, load_corpus
from mluverify.fuzz.differential import DEVIATION, judge
from mluverify.fuzz.ops import op_set
from mluverify.fuzz.program import Node, Program

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

TARGET = "planted:fused"
OPS = op_set(["transpose", "matmul", "relu", "add", "sum", "exp"])


def _campaign(runner, **kwargs):
    return Campaign([TARGET], runner, {TARGET: "cnml"}, ops=OPS, **kwargs)


def test_a_planted_two_op_bug_shrinks_to_exactly_those_two_ops(planted_runner):
    campaign = _campaign(planted_runner)
    findings = campaign.run(0, Budget(programs=200))
    assert findings, f"no finding in {campaign.stats[TARGET].programs} programs"
    first = findings[0]
    assert first.judgement.kind == DEVIATION
    assert first.program.ops == ("transpose", "matmul")
    transpose, matmul = first.program.nodes
    assert matmul.args[0] == "v0"  # the transposed view is the product's first operand
    assert abs(first.judgement.device_error - 0.5) < 1e-6  # 1.5x: relative error 0.5


def _failing(ops_before: list, ops_after: list) -> tuple[Program, list]:
    """transpose(x0) @ x0 with other ops before and after, on a 3x3 input."""
    nodes = [Node(op, ("x0",)) for op in ops_before]
    source = f"v{len(nodes) - 1}" if nodes else "x0"
    nodes += [Node("transpose", (source,), {"dim0": 0, "dim1": 1})]
    nodes += [Node("matmul", (f"v{len(nodes) - 1}", "x0"))]
    nodes += [Node(op, (f"v{len(nodes) - 1 + i}",)) for i, op in enumerate(ops_after)]
    return Program(((3, 3),), tuple(nodes)), [torch.arange(9.0).reshape(3, 3) - 4]


def test_two_programs_hitting_the_same_bug_are_one_finding(planted_runner, tmp_path):
    campaign = _campaign(planted_runner)
    for before, after in ((["relu"], ["exp"]), ([], ["relu", "sum_all"])):
        program, inputs = _failing(before, after)
        judgement = judge(program, inputs, TARGET, planted_runner, "cnml")
        assert judgement.kind == DEVIATION
        keep(tmp_path, campaign._reduced(Finding(judgement, program, tuple(inputs))))
    (finding,) = load_corpus(tmp_path)
    assert finding.program.ops == ("transpose", "matmul")
    assert finding.hits == 2
