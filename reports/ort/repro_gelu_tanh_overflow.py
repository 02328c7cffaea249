"""``F.gelu(x, approximate="tanh")`` of float32's largest value: torch gives 3.4028235e38 (x, as
tanh is 1), the TorchScript exporter's graph run by ONNX Runtime gives inf (an intermediate of
its formula overflows). The suites' test_special_points gelu_tanh on ort:cpu; ort:dynamo's
lowering (opset 20's Gelu) agrees with torch.

onnxruntime 1.32.0, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_gelu_tanh_overflow.py      # exits 1 while the deviation is there
"""
import torch
import torch.nn.functional as F
from ort_compiled import check


class GeluTanh(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


check(GeluTanh(), torch.tensor([torch.finfo(torch.float32).max, 1.0]), targets=("ort:cpu",))
