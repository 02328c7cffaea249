"""The seeds' per-op test of matmul: one file per op, runnable alone (``python test_matmul.py``)."""
import unittest

import pytest
import torch

from mluverify.testing import TestCase

pytestmark = pytest.mark.mlu_targets("mlu:cnnl")  # a CNNL op test: its ops run one by one


class TestMatmulOp(TestCase):
    def test_matmul(self):
        for m, k, n in [(16, 32, 8), (33, 64, 17)]:
            a = torch.randn(m, k)
            b = torch.randn(k, n)
            self.assertTensorsEqual(torch.matmul(a, b), torch.matmul(a.to("mlu"), b.to("mlu")).cpu(), 0.003,
                                    use_MSE=True)

    def test_linear(self):
        x = torch.randn(32, 64)
        w = torch.randn(10, 64)
        b = torch.randn(10)
        out_cpu = torch.nn.functional.linear(x, w, b)
        out_mlu = torch.nn.functional.linear(x.to("mlu"), w.to("mlu"), b.to("mlu"))
        self.assertTensorsEqual(out_cpu, out_mlu.cpu(), 0.003, use_MSE=True)


if __name__ == "__main__":
    unittest.main()
