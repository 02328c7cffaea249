"""``ort:cpu`` end to end: one small program exported to ONNX and run by onnxruntime."""
import os

import pytest
import torch

from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.differential import PASS, judge
from mluverify.fuzz.program import Node, Program
from mluverify.plugins.ort_backend import OrtBackend

_MISSING = OrtBackend().unavailable_reason()


@pytest.fixture
def ort_available():
    if _MISSING:
        if os.environ.get("CI") == "true":
            pytest.fail(f"ort:cpu must run in CI: {_MISSING}")
        pytest.skip(f"ort:cpu unavailable: {_MISSING}")


def test_a_small_program_runs_on_onnxruntime_and_passes(ort_available):
    program = Program(((3, 4), (4, 2)), (
        Node("transpose", ("x0",), {"dim0": 0, "dim1": 1}),
        Node("relu", ("v0",)),
        Node("matmul", ("x0", "x1")),
        Node("softmax", ("v2",), {"dim": 1}),
    ))
    inputs = [torch.linspace(-2, 2, 12).reshape(3, 4), torch.linspace(1, -1, 8).reshape(4, 2)]
    runner = TargetRunner()
    outputs = runner(program, inputs, "ort:cpu")
    expected = (torch.relu(inputs[0].T), torch.softmax(inputs[0] @ inputs[1], dim=1))
    assert len(outputs) == 2
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want)
    assert judge(program, inputs, "ort:cpu", runner, runner.policy("ort:cpu")).kind == PASS


def test_without_onnxruntime_the_target_says_why(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real(name))
    assert OrtBackend().unavailable_reason() == "onnxruntime not installed (pip install 'mluverify[ort]')"
