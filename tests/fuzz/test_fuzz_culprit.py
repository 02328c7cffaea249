"""Signatures that name the culprit: on the emulated MLU, the Dumper's dump-diff blames the first
op whose own error breaks the bound, so two programs that reach one wrong kernel through
different op sequences are one finding; targets the Dumper cannot see into keep the op sequence."""
import pytest
import torch

from mluverify import hookimpl
from mluverify.cli.fuzz import TargetRunner
from mluverify.core.plugin_manager import configured_plugin_manager
from mluverify.fuzz.corpus import Finding, keep, load_corpus, signature
from mluverify.fuzz.differential import DEVIATION, judge
from mluverify.fuzz.program import Program

pytest.importorskip("mluverify.device")
TARGET = "mlu:cnnl"


class WrongSigmoidKernel:
    """The device's sigmoid (op-by-op mode) 10 % too large: rel_mse 0.1, past cnnl's 0.003."""

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::sigmoid", lambda self: torch.sigmoid(self) * 1.1, mode="cnnl")


@pytest.fixture
def wrong_sigmoid():
    with configured_plugin_manager([WrongSigmoidKernel()], entry_points=False):
        yield


def _program(ops):
    """A chain of unary ops over one [2, 3] input."""
    nodes = [{"op": op, "args": [f"v{i - 1}" if i else "x0"], "params": {}} for i, op in enumerate(ops)]
    program = Program.from_json({"format": "mluverify-fuzz-program", "version": 1, "inputs": [[2, 3]],
                                 "nodes": nodes})
    return program, [torch.linspace(-2.0, 2.0, 6).reshape(2, 3)]


def test_two_op_sequences_reaching_one_wrong_kernel_are_one_finding(wrong_sigmoid, tmp_path):
    runner = TargetRunner()
    culprits = []
    for ops in (["sigmoid", "neg"], ["abs", "sigmoid", "exp"]):
        program, inputs = _program(ops)
        judgement = judge(program, inputs, TARGET, runner, runner.policy(TARGET))
        assert judgement.kind == DEVIATION, judgement.reason
        culprit = runner.culprit(program, inputs, TARGET)
        culprits.append(culprit)
        keep(tmp_path, Finding(judgement, program, tuple(inputs), culprit=culprit))
    assert culprits[0] == culprits[1] and "sigmoid" in culprits[0]
    (finding,) = load_corpus(tmp_path)
    assert finding.hits == 2
    assert finding.program.ops == ("sigmoid", "neg")  # the smaller reproducer is kept
    assert finding.signature == signature(TARGET, DEVIATION, (), culprits[0])


def test_a_correct_device_blames_no_op(tmp_path):
    runner = TargetRunner()
    assert runner.culprit(*_program(["sigmoid", "neg"]), TARGET) is None


def test_targets_the_dumper_cannot_see_keep_the_op_sequence():
    runner = TargetRunner()
    assert runner.culprit(*_program(["sigmoid", "neg"]), "cpu:inductor") is None
    assert signature("cpu:inductor", DEVIATION, ("sigmoid", "neg")) != signature(
        "cpu:inductor", DEVIATION, ("abs", "sigmoid", "exp"))


class WrongFusedSigmoid:
    """The device's fused-mode (cnml) sigmoid 10 % too large: rel_mse 0.1, past cnml's 0.02;
    its op-by-op (cnnl) kernel is right."""

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::sigmoid", lambda self: torch.sigmoid(self) * 1.1, mode="cnml")


def test_on_the_fused_mode_the_wrong_op_is_found_inside_its_group(tmp_path):
    """Both programs fuse whole (one group each, of other ops); run alone as a group, sigmoid
    still breaks the bound and the other ops do not, so both blame sigmoid: one finding."""
    with configured_plugin_manager([WrongFusedSigmoid()], entry_points=False):
        runner = TargetRunner()
        culprits = set()
        for ops in (["sigmoid", "neg"], ["abs", "sigmoid", "exp"]):
            program, inputs = _program(ops)
            judgement = judge(program, inputs, "mlu:cnml", runner, runner.policy("mlu:cnml"))
            assert judgement.kind == DEVIATION, judgement.reason
            culprit = runner.culprit(program, inputs, "mlu:cnml")
            culprits.add(culprit)
            keep(tmp_path, Finding(judgement, program, tuple(inputs), culprit=culprit))
        assert culprits == {"aten::sigmoid (fused)"}
        assert runner.culprit(*_program(["sigmoid", "neg"]), "mlu:cnnl") is None  # cnnl's kernel is right
    (finding,) = load_corpus(tmp_path)
    assert finding.hits == 2 and finding.culprit == "aten::sigmoid (fused)"


def test_a_correct_fused_mode_blames_no_group():
    assert TargetRunner().culprit(*_program(["abs", "sigmoid", "exp"]), "mlu:cnml") is None
