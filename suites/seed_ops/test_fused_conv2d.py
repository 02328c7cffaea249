"""The seeds' CNML (fused) op test of conv2d + relu: the module traced, moved to ``mlu`` and
called on ``mlu`` inputs, which the device runs fused; within CNML's 2 %. Runnable alone
(``MLUVERIFY_TARGET=mlu:cnml python test_fused_conv2d.py``)."""
import unittest

import pytest
import torch
from torch import nn

from mluverify.testing import TestCase

pytestmark = pytest.mark.mlu_targets("mlu:cnml")  # a CNML op test: judged as it ran fused


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(x))


class TestFusedConv2dOp(TestCase):
    def test_conv2d_relu(self):
        model = ConvRelu().eval()
        x = torch.randn(2, 8, 10, 10)
        with torch.no_grad():
            traced = torch.jit.trace(model, x, check_trace=False)
            out_cpu = model(x)
            out_mlu = traced.to("mlu")(x.to("mlu"))
        self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.02, use_MSE=True)


if __name__ == "__main__":
    unittest.main()
