"""``torch.cumsum`` of an int32 tensor is int64 in torch (integer inputs accumulate in int64);
the TorchScript exporter's ``CumSum`` keeps int32, so ort:cpu returns int32: the values agree
while they fit, the dtype does not (and an int32 running sum would wrap where torch's does not).
ort:dynamo keeps torch's int64.

onnxruntime 1.32.0, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_cumsum_int32_dtype.py      # exits 1 while the deviation is there
"""
import sys

import torch
from ort_compiled import run


class CumSum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, 0)


x = torch.tensor([1, 2, 3], dtype=torch.int32)
expected, got = CumSum()(x), run(CumSum(), x, target="ort:cpu")
print(f"torch:   {expected.tolist()} {expected.dtype}\nort:cpu: {got.tolist()} {got.dtype}")
sys.exit(0 if got.dtype == expected.dtype and torch.equal(got, expected) else 1)
