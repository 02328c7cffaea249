"""The seeds' TestModel and MNIST flows stay within their bounds on both core versions.

The scripts run unchanged (``run_seed_script``); the TestModel ones set no core version, so
they run under the version selected around them. The MNIST quickstart selects MLU270 itself
(``ct.set_core_version("MLU270")``): its deployed network is then run again under each version.
"""
from __future__ import annotations

import pytest
import torch

from mluverify.judge import compare
from mluverify.device import mlu_model
from mluverify.device.numerics import PROFILES

# The scripts call torch.jit.trace verbatim, which torch marks deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

TESTMODEL_FLOWS = [("testmodel_fp32.py", torch.float32), ("testmodel_fp16.py", torch.float16),
                   ("testmodel_int8_fp32.py", torch.float32), ("testmodel_int16_fp16.py", torch.float16)]


@pytest.mark.parametrize("version", sorted(PROFILES))
@pytest.mark.parametrize("name, dtype", TESTMODEL_FLOWS, ids=[name for name, _ in TESTMODEL_FLOWS])
def test_testmodel_flows_within_the_fused_bound(run_seed_script, name, dtype, version):
    with mlu_model.core_version(version):
        script = run_seed_script(name)
    output = script["output"]
    # The traced module shares its parameters with ``model``, so after ``.half()`` the float
    # reference runs with the float16-valued weights the device saw.
    expected = script["model"].float()(script["input1"])
    assert output.device.type == "mlu" and output.dtype == dtype and output.shape == expected.shape
    verdict = compare(output.cpu().float(), expected, mode="cnml")
    assert verdict.passed, verdict.reason
    assert not torch.equal(output.cpu().float(), expected)


@pytest.mark.parametrize("version", sorted(PROFILES))
def test_mnist_quickstart_within_the_fused_bound(run_seed_script, version):
    script = run_seed_script("mnist_quickstart.py")
    with mlu_model.core_version(version):
        output = script["net_mlu"](script["input_mlu"]).cpu()
    # firstconv with mean 0, std 1/255 normalises nothing: the float net on the same input is the reference.
    verdict = compare(output, script["net"](script["input_data"]), mode="cnml")
    assert verdict.passed, verdict.reason
