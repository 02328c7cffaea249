"""OpenVINO keeps an int64 tensor's dtype under float bounds: ``torch.clamp(i, -1.0, 0.0)`` of an
int64 tensor is float32 in torch (a float Python scalar promotes an integer tensor to the default
float dtype) and int64 compiled by OpenVINO, in both precisions. Found by the seventh campaign's
phase E (fuzz finding ``0316b30eecd0``, ``openvino:default``, ``sort`` indices then ``clamp``);
the TorchScript ONNX exporter has the same class with a tensor bound
(reports/ort/repro_clamp_tensor_bound_dtype.py).

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_clamp_int64_float_bounds.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class ClampFloatBounds(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -1.0, 0.5)


check(ClampFloatBounds(), torch.tensor([-3, 0, 2]))
