"""The seeds' per-op test of add: one file per op, runnable alone (``python test_add.py``)."""
import unittest

import pytest
import torch

from mluverify.testing import TestCase

pytestmark = pytest.mark.mlu_targets("mlu:cnnl")  # a CNNL op test: its ops run one by one


class TestAddOp(TestCase):
    def test_add(self):
        for shape in [(2, 3, 4, 5), (16, 128), (1,)]:
            x = torch.randn(shape)
            y = torch.randn(shape)
            out_cpu = torch.add(x, y)
            out_mlu = torch.add(x.to("mlu"), y.to("mlu"))
            self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.003, use_MSE=True)

    def test_add_scalar_inplace(self):
        x = torch.randn(8, 32)
        x_mlu = x.to("mlu")
        x.add_(2.5)
        x_mlu.add_(2.5)
        self.assertTensorsEqual(x, x_mlu.cpu(), 0.003, use_MSE=True)


if __name__ == "__main__":
    unittest.main()
