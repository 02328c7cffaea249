"""Both ONNX exporters turn ``torch.clamp_min(x, inf)`` into ``Clip(x, min=inf)`` with no ``max``,
and ONNX's Clip takes an absent ``max`` as the type's largest finite value: ONNX Runtime gives
3.4028235e38 for every element where torch gives inf (``clamp_max(x, -inf)`` likewise gives
-3.4028235e38). The suites' test_special_points clamp_min / clamp_max on ort:cpu and ort:dynamo.

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_clamp_min_inf.py      # exits 1 while the deviation is there
"""
import torch
from ort_compiled import check


class ClampMinInf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, float("inf"))


check(ClampMinInf(), torch.tensor([1.0, -2.0, 0.0]))
