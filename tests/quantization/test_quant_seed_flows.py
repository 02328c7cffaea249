"""The vendor document's quantization scripts run unchanged through the compat layer."""
from __future__ import annotations


import pytest
import torch

from mluverify.judge import compare



def test_mnist_quickstart_with_firstconv(run_seed_script):
    script = run_seed_script("mnist_quickstart.py")
    output = script["output"]
    assert output.device.type == "mlu" and output.shape == (1, 10)
    # firstconv with mean 0, std 1/255 normalises nothing: the float net on the same input is the reference.
    expected = script["net"](script["input_data"])
    assert compare(output.cpu(), expected, mode="cnml").passed


@pytest.mark.parametrize("name,dtype", [("testmodel_int8_fp32.py", torch.float32),
                                        ("testmodel_int16_fp16.py", torch.float16)])
def test_testmodel_flows(run_seed_script, name, dtype):
    script = run_seed_script(name)
    output = script["output"]
    expected = script["model"](script["input1"])
    assert output.device.type == "mlu" and output.dtype == dtype and output.shape == expected.shape
    assert compare(output.cpu().float(), expected, mode="cnml").passed  # float16 -> 32 is exact
