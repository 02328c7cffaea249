"""The seeds' per-op test of conv2d: one file per op, runnable alone (``python test_conv2d.py``)."""
import unittest

import pytest
import torch
import torch.nn.functional as F

from mluverify.testing import TestCase

pytestmark = pytest.mark.mlu_targets("mlu:cnnl")  # a CNNL op test: its ops run one by one


class TestConv2dOp(TestCase):
    def test_conv2d(self):
        for stride, padding, groups in [(1, 1, 1), (2, 0, 4)]:
            x = torch.randn(2, 8, 10, 10)
            w = torch.randn(16, 8 // groups, 3, 3)
            b = torch.randn(16)
            out_cpu = F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups)
            out_mlu = F.conv2d(x.to("mlu"), w.to("mlu"), b.to("mlu"), stride=stride, padding=padding, groups=groups)
            self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.003, use_MSE=True)


if __name__ == "__main__":
    unittest.main()
