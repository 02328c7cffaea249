"""The fused-inference chapter's scripts run unchanged through the compat layer, fused."""
from __future__ import annotations


import pytest
import torch

from mluverify.judge import compare
from mluverify.device.fusion import fusion_summary

# The scripts call torch.jit.trace verbatim, which torch marks deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SEED_OPS = {"aten::convolution", "aten::_native_batch_norm_legit_no_training", "aten::relu",
            "aten::add.Tensor", "aten::max_pool2d", "aten::transpose.int"}


def test_conv_single_op(run_seed_script):
    script = run_seed_script("conv_single_op.py")
    summary = fusion_summary(script["module"])
    assert [g.ops for g in summary.groups] == [("aten::convolution",)]
    verdict = compare(script["out_cpu"], script["n"](script["input"]), mode="cnml")
    assert verdict.passed, verdict.reason


def test_relu_single_op(run_seed_script):
    script = run_seed_script("relu_single_op.py")
    assert [g.ops for g in fusion_summary(script["relu_mlu"]).groups] == [("aten::relu",)]
    assert torch.equal(script["out_cpu"], torch.relu(script["input"]))


@pytest.mark.parametrize("name, dtype", [("testmodel_fp32.py", torch.float32), ("testmodel_fp16.py", torch.float16)])
def test_testmodel_flows(run_seed_script, name, dtype):
    script = run_seed_script(name)
    output = script["output"]
    # The traced module shares its parameters with ``model``, so after ``traced_model.half()``
    # the float reference runs with float16-valued weights.
    expected = script["model"].float()(script["input1"])
    assert output.device.type == "mlu" and output.dtype == dtype and output.shape == expected.shape
    assert SEED_OPS <= set(fusion_summary(script["traced_model"]).groups[0].ops)
    verdict = compare(output.cpu().float(), expected, mode="cnml")
    assert verdict.passed, verdict.reason
    assert not torch.equal(output.cpu().float(), expected)
