"""``torch.cumsum`` of an int32 tensor is int64 in torch (integer inputs accumulate in int64);
OpenVINO's CumSum keeps int32, so openvino:cpu / openvino:default return int32: the values agree
while they fit, the dtype does not (ONNX Runtime's TorchScript path does the same,
reports/ort/repro_cumsum_int32_dtype.py).

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_cumsum_int32_dtype.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class CumSum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, 0)


check(CumSum(), torch.tensor([1, 2, 3], dtype=torch.int32))
