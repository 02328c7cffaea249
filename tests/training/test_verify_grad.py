"""``verify(fn, *args, grad=True)`` end to end (pytester, mlu:cnnl): one record per output, input
gradient, parameter gradient and updated parameter, with the golden reference when asked for; a
planted wrong backward kernel (registered
through ``mluverify_device_kernels``) fails the gradient records while the forward passes; a
backward op without a device kernel makes the gradient records ``not_on_device``."""
from __future__ import annotations

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

SUITE = """
import torch, torch.nn as nn, torch.nn.functional as F

class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, image):
        return self.fc(torch.flatten(torch.relu(self.conv(image)), 1))

def test_model(verify):
    torch.manual_seed(0)
    verify(Small(), torch.randn(2, 2, 6, 6), op="small", grad=True)

def test_function_of_two_inputs(verify):
    torch.manual_seed(1)
    verify(lambda a, b: torch.tanh(a) * b, torch.randn(4, 5), torch.randn(4, 5), op="tanh", grad=True)

def test_sgd_step(verify):
    torch.manual_seed(2)
    verify(nn.Linear(4, 3), torch.randn(6, 4), op="linear", grad=True,
           optimizer=lambda params: torch.optim.SGD(params, lr=0.5))

def test_golden(verify):
    torch.manual_seed(4)
    verify(Small(), torch.randn(2, 2, 6, 6), op="small", grad=True, golden=True)

def test_softplus(verify):
    torch.manual_seed(3)
    verify(F.softplus, torch.randn(8), op="softplus", grad=True)
"""

# relu's backward 1 % too large: a wrong gradient, a right forward
PLANTED = """
from mluverify import hookimpl

def _threshold_backward_scaled(grad_output, self, threshold):
    import torch
    return torch.ops.aten.threshold_backward.default(grad_output, self, threshold) * 1.01

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::threshold_backward", _threshold_backward_scaled)
"""

# softplus gets a forward kernel but no backward one: its backward runs on the CPU
SOFTPLUS_FORWARD = """
from mluverify import hookimpl

@hookimpl
def mluverify_device_kernels(registry):
    import torch
    registry.register("aten::softplus", torch.ops.aten.softplus.default)
"""

pytestmark = pytest.mark.slow


def _run(pytester, *plugins):
    pytester.makepyfile(test_grad=SUITE, planted_backward=PLANTED, softplus_forward=SOFTPLUS_FORWARD)
    result = pytester.runpytest_subprocess("-p", "mluverify", *plugins, f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnnl", "--mlu-core-version=MLU270", "-p",
                                           "no:cacheprovider", "-p", "softplus_forward")
    frame = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()
    frame["test"] = frame["case_id"].str.split("::").str[-1].str.split("[").str[0]
    return result, frame


def test_each_output_gradient_and_updated_parameter_is_its_own_record_with_its_status(pytester):
    result, frame = _run(pytester)
    result.assert_outcomes(passed=4, failed=1)  # softplus: its backward ran on the CPU
    model = frame[frame.test == "test_model"]
    assert sorted(zip(model.kind, model.leaf)) == [
        ("grad", "conv.bias.grad"), ("grad", "conv.weight.grad"), ("grad", "fc.bias.grad"),
        ("grad", "fc.weight.grad"), ("grad", "image.grad"), ("output", "output")]
    assert model.case_id.nunique() == 1 and (model.status == "passed").all()
    two_inputs = frame[frame.test == "test_function_of_two_inputs"]
    assert sorted(two_inputs.leaf) == ["a.grad", "b.grad", "output"]
    sgd = frame[frame.test == "test_sgd_step"]
    assert sorted(zip(sgd.kind, sgd.leaf)) == [
        ("grad", "bias.grad"), ("grad", "input.grad"), ("grad", "weight.grad"), ("output", "output"),
        ("param", "bias"), ("param", "weight")]
    assert (sgd.status == "passed").all()
    # the golden (float64) reference judges every leaf: device and reference errors recorded
    golden = frame[frame.test == "test_golden"]
    assert len(golden) == 6 and golden.device_error.notna().all() and golden.reference_error.notna().all()
    assert model.device_error.isna().all()
    # a backward op on the CPU makes the gradient not_on_device, the output stays passed
    softplus = frame[frame.test == "test_softplus"].set_index("kind")
    assert softplus.loc["output", "status"] == "passed"
    assert softplus.loc["grad", "status"] == "not_on_device"
    assert "aten::softplus_backward" in softplus.loc["grad", "fallback_ops"]
    result.stdout.fnmatch_lines(["*softplus*not_on_device*"])


def test_a_planted_wrong_backward_kernel_fails_the_gradients_while_the_forward_passes(pytester):
    result, frame = _run(pytester, "-p", "planted_backward")
    model = frame[frame.test == "test_model"].set_index("leaf")
    assert model.loc["output", "status"] == "passed"
    # everything upstream of the ReLU gets the scaled gradient; fc's own gradients do not
    assert set(model.index[model.status == "failed"]) == {"image.grad", "conv.weight.grad", "conv.bias.grad"}
    assert (model.loc[["fc.weight.grad", "fc.bias.grad"], "status"] == "passed").all()
    result.stdout.fnmatch_lines(["*test_model*", "*small on mlu:cnnl*image.grad*"])
    assert (frame[frame.test == "test_function_of_two_inputs"].status == "passed").all()
