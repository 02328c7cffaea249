"""A plugin's device kernels (``mluverify_device_kernels``) reach the device the fuzzer runs
on: in the ``mluverify fuzz`` process and in the child process that runs isolated targets."""
import functools

import torch

from mluverify.cli import main
from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.differential import DEVIATION, PASS, judge
from mluverify.fuzz.isolation import IsolatedRunner
from mluverify.fuzz.program import Node, Program

KERNELS = "fuzz_planted_kernels"
GELU = Program(((2, 3),), (Node("relu", ("x0",)), Node("gelu", ("v0",))))
X = [torch.linspace(-1.0, 2.0, 6).reshape(2, 3)]


def test_an_isolated_target_runs_the_plugins_kernel():
    with IsolatedRunner(functools.partial(TargetRunner, (KERNELS,))) as runner:
        judgement = judge(GELU, X, "mlu:cnnl", runner, "cnnl")
    assert judgement.kind == DEVIATION, judgement.reason
    assert judge(GELU, X, "mlu:cnnl", TargetRunner(), "cnnl").kind == PASS  # the device's own gelu


def test_a_campaign_with_the_plugin_finds_its_wrong_gelu(capsys):
    argv = ["fuzz", "--target", "mlu:cnnl", "--plugin", KERNELS, "--ops", "gelu,add,relu", "--seed", "0",
            "--budget", "10", "--in-process"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "deviation on mlu:cnnl" in out and "culprit aten::gelu" in out
