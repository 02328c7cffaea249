"""The seeds' per-op test of softmax: one file per op, runnable alone (``python test_softmax.py``)."""
import unittest

import pytest
import torch

from mluverify.testing import TestCase

pytestmark = pytest.mark.mlu_targets("mlu:cnnl")  # a CNNL op test: its ops run one by one


class TestSoftmaxOp(TestCase):
    def test_softmax(self):
        for dim in (0, 1, -1):
            x = torch.randn(8, 100, 4)
            out_cpu = torch.softmax(x, dim)
            out_mlu = torch.softmax(x.to("mlu"), dim)
            self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.003, use_MSE=True)

    def test_log_softmax_rae(self):
        x = torch.randn(16, 10)
        out_cpu = torch.log_softmax(x, 1)
        out_mlu = torch.log_softmax(x.to("mlu"), 1)
        self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.003, use_RAE=True)


if __name__ == "__main__":
    unittest.main()
