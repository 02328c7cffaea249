"""The vendor document's quantization scripts run unchanged through the compat layer."""
from __future__ import annotations

import random
import runpy
from pathlib import Path

import pytest
import torch

from mluverify import compat
from mluverify.compare import compare

SCRIPTS = Path(__file__).parent / "seed_scripts"


@pytest.fixture
def run_seed_script(monkeypatch, tmp_path):
    """Run a script from ``seed_scripts`` in a fresh directory; returns its globals."""
    monkeypatch.chdir(tmp_path)  # the scripts save .pth files in the working directory
    compat.install()
    grad_enabled = torch.is_grad_enabled()
    random.seed(0)
    torch.manual_seed(0)
    yield lambda name: runpy.run_path(str(SCRIPTS / name), run_name="__main__")
    torch.set_grad_enabled(grad_enabled)  # the scripts switch autograd off globally


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
