"""Points where an op is defined but special (signed zeros, infinities) are drawn and judged:
the domain restrictions keep only NaN out, and infinities are compared exactly, signs included."""
import runpy
import shlex

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from mluverify.cli import main
from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.campaign import Campaign
from mluverify.fuzz.corpus import Finding, keep
from mluverify.fuzz.differential import DEVIATION, PASS, REFERENCE, judge
from mluverify.fuzz.generate import all_defined, defined_cases
from mluverify.fuzz.ops import op_set
from mluverify.fuzz.program import Node, Program, run

KERNELS = "fuzz_planted_kernels"  # rsqrt(-0.0) and x / -0.0 taken at +0.0 on mlu:cnnl
TARGET = "mlu:cnnl"
RSQRT = Program(((3,),), (Node("neg", ("x0",)), Node("rsqrt", ("v0",))))


def test_signed_zeros_reach_the_ops_and_give_signed_infinities():
    (root,) = run(RSQRT, [torch.tensor([0.0, -0.0, 4.0])])  # rsqrt of -0.0, +0.0, 4
    assert root.tolist() == [-float("inf"), float("inf"), 0.5]
    quotient = Program(((2,), (2,)), (Node("relu", ("x0",)), Node("div", ("v0", "x1"))))
    (out,) = run(quotient, [torch.tensor([1.0, 2.0]), torch.tensor([-0.0, float("inf")])])
    assert out.tolist() == [-float("inf"), 0.0]


def test_only_what_is_undefined_is_kept_out():
    assert all_defined(RSQRT, [torch.tensor([0.0, -0.0, float("-inf")])])  # -inf, +inf, +0
    nan = Program(((2,), (2,)), (Node("relu", ("x0",)), Node("div", ("v0", "x1"))))
    assert not all_defined(nan, [torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0])])  # 0 / 0
    overflow = Program(((1,),), (Node("mul_scalar", ("x0",), {"s": 3.0}), Node("exp", ("v0",))))
    assert not all_defined(overflow, [torch.tensor([40.0])])  # inf in float32 alone


def test_integer_boundaries_are_drawn():
    """A float cast to an integer dtype is clamped into its range (out of it the cast is
    undefined), so large values land on the dtype's minimum and, through ``bitwise_not``, its
    maximum, where ``neg`` wraps."""
    seen = set()

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(defined_cases(op_set(["to_int", "bitwise_not", "neg"])))
    def draw(case):
        for value in run(*case, every_value=True):
            if not value.is_floating_point():
                info = torch.iinfo(value.dtype)
                seen.update((value.dtype, end) for end in (info.min, info.max) if bool((value == end).any()))

    draw()
    both_ends = {dtype for dtype, _ in seen if len({end for other, end in seen if other == dtype}) == 2}
    assert len(both_ends) >= 2, seen


def test_an_infinity_of_the_wrong_sign_deviates_and_the_right_one_passes():
    x = [torch.tensor([0.0, -0.0, 4.0])]
    (right,) = run(RSQRT, x)
    assert judge(RSQRT, x, "same:x", lambda p, inputs, t: (right.clone(),), "cnnl").kind == PASS
    wrong = right.abs()  # -inf read as +inf
    judgement = judge(RSQRT, x, "unsigned:x", lambda p, inputs, t: (wrong,), "cnnl")
    assert judgement.kind == DEVIATION and "NaN/Inf position(s) differ" in judgement.reason
    everywhere = [torch.tensor([0.0, -0.0])]  # every output element infinite: still judged
    assert judge(RSQRT, everywhere, "same:x", lambda p, inputs, t: run(p, inputs), "cnnl").kind == PASS


def test_a_cumsum_keeping_a_leading_negative_zero_is_cleared_as_the_cpus_error():
    """IEEE 754 keeps -0.0 at the head of a running sum; torch's CPU cumsum gives +0.0 there
    (pytorch/pytorch#195851), and ``atan2(v, v)`` turns the sign into -pi against 0. The float64
    run keeps it: a target that does (ExecuTorch's portable cumsum, the sixth campaign's
    ``e0a1be774254``) is the reference's error, one that drops it as torch does passes."""
    program = Program(((2, 3),), (Node("cumsum", ("x0",), {"dim": 1}), Node("atan2", ("v0", "v0"))))
    x = [torch.tensor([[-0.0, -0.0, 1.0], [-0.0, 0.0, 0.5]])]
    pi = torch.pi
    ieee = torch.tensor([[-pi, -pi, pi / 4], [-pi, 0.0, pi / 4]])
    assert run(program, x, golden=True)[0].float().tolist() == ieee.tolist()
    assert judge(program, x, "ieee:x", lambda p, inputs, t: (ieee.clone(),), "cnnl").kind == REFERENCE
    assert judge(program, x, "eager:x", lambda p, inputs, t: run(p, inputs), "cnnl").kind == PASS
    integers = Program(((3,),), (Node("to_int", ("x0",), {"dtype": "int8", "scale": 1.0, "lo": -128.0,
                                                          "hi": 127.0}), Node("cumsum", ("v0",), {"dim": 0})))
    three = [torch.tensor([-0.0, 2.0, -5.0])]
    assert run(integers, three, golden=True)[0].tolist() == run(integers, three)[0].tolist() == [0, 2, -3]
    assert run(integers, three, golden=True)[0].dtype == torch.int64


def _findings(runner) -> list:
    """The first finding of a 10-program search over each planted op and ``neg`` (unshrunk:
    hypothesis's shrinking of inputs of hundreds of elements takes tens of seconds)."""
    found = []
    for ops in (["rsqrt", "neg"], ["div", "neg"]):
        campaign = Campaign([TARGET], runner, {TARGET: "cnnl"}, ops=op_set(ops), shrink_runs=0)
        found.append(campaign.search(TARGET, 0, 10))
    return found


def test_a_short_campaign_catches_planted_signed_zero_bugs_and_passes_the_clean_device():
    with TargetRunner([KERNELS]) as planted:
        rsqrt, div = _findings(planted)
    for finding, op in ((rsqrt, "rsqrt"), (div, "div")):
        assert finding is not None and finding.judgement.kind == DEVIATION and op in finding.program.ops
        assert "NaN/Inf position(s) differ" in finding.judgement.reason
    assert _findings(TargetRunner()) == [None, None]


def test_the_findings_reproducers_load_its_plugins_and_show_the_wrong_infinity(tmp_path, capsys):
    x = [torch.tensor([0.0, -0.0, 4.0])]
    with TargetRunner([KERNELS]) as planted:
        judgement = judge(RSQRT, x, TARGET, planted, "cnnl")
    finding, _ = keep(tmp_path, Finding(judgement, RSQRT, tuple(x), plugins=(KERNELS,)))
    assert main(shlex.split(finding.reproducer(tmp_path))[1:] + ["--in-process"]) == 1
    assert f"{finding.signature} on {TARGET}: reproduces (deviation" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(tmp_path / f"{finding.signature}.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert exited.value.code == 1 and f"MISMATCH output 0 on {TARGET}: NaN/Inf other than the CPU's: [inf, inf]" in out
