"""The reference gradient of the device's own forward (``mluverify.core.selections``): the CPU
takes the device's ReLU masks and max-pool argmaxes at near ties, and only there. The "device"
of the unit tests is the CPU run on inputs nudged across a tie, the way rounding moves the
device's activations; end to end, the training suite's MNIST step needs no waiver on MLU370
and a 1 % error planted in the convolution's weight gradient fails it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas  # noqa: F401  (loaded before any test imports pyarrow's pandas shim)
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from mluverify.core.selections import TIE, device_forward_reference, follow, forward_mode, record


def _forward(function, x):
    """``function(x)`` as a gradient probe runs its forward: under ``forward_mode``."""
    with forward_mode():
        return function(x)


def _gradient(function, x):
    """The gradient of ``function`` at ``x`` for the upstream gradient 0, 1, 2, ... (the
    backward, as a probe's, outside ``forward_mode``)."""
    x = x.clone().requires_grad_()
    output = _forward(function, x)
    output.backward(torch.arange(float(output.numel())).reshape(output.shape))
    return x.grad


def test_relu_follows_the_device_mask_at_a_near_tie_and_only_there():
    x = torch.tensor([1.0, -1e-6, 2e-6, -0.5, 0.7])
    device = x.clone()
    device[1], device[2] = 1e-6, -2e-6  # rounding moved two near-zero inputs across 0
    device[3] = 0.5                     # and one far from a tie: a wrong mask, not rounding
    _, chosen = record(lambda: _forward(torch.relu, device))
    followed_grad, followed = follow(chosen, lambda: _gradient(torch.relu, x))
    assert followed.problem == "" and followed.elements == 2
    # the device's mask at the ties (1 passes, 2 is cut), the CPU's own at the far element 3
    assert followed_grad.tolist() == [0.0, 1.0, 0.0, 0.0, 4.0]
    assert _gradient(torch.relu, x).tolist() == [0.0, 0.0, 2.0, 0.0, 4.0]


def test_an_in_place_relu_follows_the_device_as_well():
    x = torch.tensor([[0.3, -1e-7], [1e-7, -0.2]])
    device = torch.tensor([[0.3, 1e-7], [1e-7, -0.2]])
    _, chosen = record(lambda: _forward(lambda t: F.relu(t, inplace=True), device.clone()))
    followed_grad, followed = follow(chosen, lambda: _gradient(lambda t: F.relu(t * 1.0, inplace=True), x))
    assert followed.elements == 1 and followed_grad.tolist() == [[0.0, 1.0], [2.0, 0.0]]


@pytest.mark.parametrize("relu6", [lambda t: F.relu6(t * 1.0), lambda t: F.relu6(t * 1.0, inplace=True)],
                         ids=["out_of_place", "in_place"])
def test_relu6_follows_the_device_side_of_either_bound_at_a_near_tie_and_only_there(relu6):
    """ReLU6 (hardtanh(0, 6): MobileNets) masks its backward by ``0 < x < 6`` of the input autograd
    saved (for the in-place form a clone of it), not by its result."""
    x = torch.tensor([1.0, -1e-6, 2e-6, 6 - 1e-6, 6 + 2e-6, -0.5, 3.0])
    device = x.clone()
    device[1], device[2] = 1e-6, -2e-6          # rounding moved two inputs across 0
    device[3], device[4] = 6 + 1e-6, 6 - 2e-6   # and two across 6
    device[5] = 0.5                             # one far from a tie: a wrong mask, not rounding
    _, chosen = record(lambda: _forward(relu6, device.clone()))
    followed_grad, followed = follow(chosen, lambda: _gradient(relu6, x))
    assert followed.problem == "" and followed.elements == 4
    # upstream 0, 1, 2, ...: the device's side at the four ties, the CPU's own at element 5
    assert followed_grad.tolist() == [0.0, 1.0, 0.0, 0.0, 4.0, 0.0, 6.0]
    assert _gradient(relu6, x).tolist() == [0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 6.0]


def test_relu6_of_a_case_argument_leaves_the_argument_as_it_is():
    """The followed value is written into the input the backward reads: never into the caller's
    tensor (which the device gets unrounded, so it has no near tie to follow)."""
    given = torch.tensor([-1e-6, 3.0])
    x = given.clone().requires_grad_()
    _, chosen = record(lambda: _forward(F.relu6, torch.tensor([1e-6, 3.0])))
    _, followed = follow(chosen, lambda: _forward(F.relu6, x))
    assert followed.elements == 0 and torch.equal(x.detach(), given)


def test_max_pool_follows_the_device_argmax_of_a_near_tie_window():
    x = torch.tensor([[[[1.0, 1.0 - 1e-6, 0.0, 3.0],
                        [0.0, 0.0, 2.0, 0.0]]]])
    device = x.clone()
    device[0, 0, 0, 1] = 1.0 + 1e-6  # the near tie of window 0 goes the other way
    device[0, 0, 1, 2] = 4.0         # window 1: a far winner, beyond rounding
    pool = lambda t: F.max_pool2d(t, 2)  # noqa: E731
    _, chosen = record(lambda: _forward(pool, device))
    followed_grad, followed = follow(chosen, lambda: _gradient(pool, x))
    assert followed.elements == 1
    assert followed_grad[0, 0].tolist() == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
    assert followed_grad[0, 0, 0, 1] == 0.0 and _gradient(pool, x)[0, 0, 0, 0] == 0.0


def test_a_tie_is_judged_against_the_input_largest_magnitude():
    x = torch.tensor([100.0, -TIE * 100 * 0.9, -TIE * 100 * 1.1])
    _, chosen = record(lambda: _forward(torch.relu, x.abs()))  # the device: every element positive
    _, followed = follow(chosen, lambda: _forward(torch.relu, x))
    assert followed.elements == 1  # 0.9 x TIE of the largest is a tie, 1.1 x is not


def test_selections_that_do_not_line_up_leave_the_reference_as_it_was():
    x = torch.tensor([-1e-6, 1.0])
    _, chosen = record(lambda: _forward(torch.relu, -x))
    expected = (torch.tensor(0.0), (torch.ones(2),))
    pooled = lambda: (torch.tensor(1.0), (_forward(lambda t: F.max_pool2d(t, 1), x[None, None, None]),))  # noqa: E731
    reference, note = device_forward_reference(pooled, chosen, expected)
    assert reference is expected and note.startswith("reference gradients do not follow the device's forward:")
    _, followed = follow(chosen, lambda: _forward(lambda t: (torch.relu(t), torch.relu(t)), x))
    assert "more selecting ops" in followed.problem


def _mnist_step(tmp_path: Path, *plugin: str) -> pandas.DataFrame:
    """The training suite's MNIST step 0 (float32) on mlu:cnnl, MLU370 (TF32: the most flips)."""
    root = Path(__file__).parents[2]
    report = tmp_path / ("planted" if plugin else "clean")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *plugin,
                    "suites/training/test_training.py", "-k", "mnist_net-float32-step0",
                    "--mlu-core-version=MLU370", f"--mlu-report={report}"], cwd=root, env=env, check=False,
                   capture_output=True)
    return pq.read_table(report / "records.parquet").to_pandas().set_index("leaf")


CONV_WEIGHT_GRADIENT_1_PERCENT_OFF = """
from mluverify import hookimpl

def _weight_gradient_scaled(*args):
    from mluverify.device.backward_kernels import convolution_backward
    grad_input, grad_weight, grad_bias = convolution_backward(*args)
    return grad_input, None if grad_weight is None else grad_weight * 1.01, grad_bias

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::convolution_backward_overrideable", _weight_gradient_scaled)
"""


@pytest.mark.heavy  # two runs of the suite's step (about 10 s of CPU each)
def test_the_mnist_step_needs_no_waiver_and_a_planted_gradient_error_fails_it(tmp_path):
    clean = _mnist_step(tmp_path)
    assert (clean.status == "passed").all() and clean.waiver_reason.isna().all()
    assert clean.reason.str.contains("reference gradients follow the device's forward at").all()
    (tmp_path / "conv_weight_off.py").write_text(CONV_WEIGHT_GRADIENT_1_PERCENT_OFF)
    planted = _mnist_step(tmp_path, "-p", "conv_weight_off")
    weights = ["model.conv1.weight.grad", "model.conv2.weight.grad"]
    assert (planted.loc[weights, "status"] == "failed").all()
    assert (planted.loc[weights, "value"] > 0.009).all()
    assert planted.loc["model.fc1.weight.grad", "status"] == "passed"
