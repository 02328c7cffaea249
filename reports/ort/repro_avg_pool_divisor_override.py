"""``F.avg_pool2d(..., divisor_override=2)``: torch divides every window's sum by 2; both ONNX
exporters export an ``AveragePool`` (which has no divisor attribute) and drop the override, so
every window is divided by the kernel's size instead (9, padding counted as torch's default
``count_include_pad`` counts it): ``avg_pool2d(ones(1, 1, 3, 3), 3, 1, 1, divisor_override=2)`` is
2, 3, 4.5 on torch and 4/9, 6/9, 1 on ONNX Runtime. No error and no
warning from either exporter: the values are silently wrong. Found by the OpInfo suite's first
``nn.functional.avg_pool2d`` sample on ort:cpu and ort:dynamo (rel_mse 0.744, float32 and float16).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_avg_pool_divisor_override.py      # exits 1 while the deviation is there
"""
import torch
import torch.nn.functional as F
from ort_compiled import check


class AvgPoolDivisor(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=2)


check(AvgPoolDivisor(), torch.ones(1, 1, 3, 3))
