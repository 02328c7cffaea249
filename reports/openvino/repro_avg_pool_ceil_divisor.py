"""OpenVINO divides the last ``ceil_mode`` window of avg_pool1d / avg_pool2d by the whole kernel:
with ``ceil_mode=True`` and ``padding > 0`` a last window that runs past the padded end is
averaged by torch over the window clipped to the padded input (its padding counted,
``count_include_pad=True``; the overhang ``ceil_mode`` adds is not). ``avg_pool1d`` of five ones,
kernel 4, stride 2, padding 1: the last window holds two ones and one pad, torch gives 2 / 3 and
OpenVINO 2 / 4 = 0.5, in float32 (the f32 hint) as at the default precision: the divisor, not a
rounding. The suites' avg_pool1d case: rel_mse 0.10 on openvino:cpu, 0.097 on openvino:default.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported for OpenVINO's PyTorch front end
(the same divisor was onnxruntime's, microsoft/onnxruntime#16203, fixed from opset 19 in #16752).
    .venv/bin/python reports/openvino/repro_avg_pool_ceil_divisor.py      # exits 1 while the deviation is there
"""
import torch
import torch.nn.functional as F
from openvino_compiled import check


class AvgPool1d(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool1d(x, 4, 2, 1, ceil_mode=True)


check(AvgPool1d(), torch.ones(1, 1, 5))
