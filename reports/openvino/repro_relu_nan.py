"""OpenVINO's relu drops NaN: ``torch.relu`` of NaN is NaN in torch and 0 compiled by OpenVINO's
CPU plugin, in float32 and float16, on both precisions (the f32 hint and the default): the same
class as its clamp (reports/openvino/repro_clamp_nan.py). The suites' float16 relu case on
openvino:default drew NaN inputs (48 positions); the float32 runs' drawn relu examples held none.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_relu_nan.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


check(Relu(), torch.tensor([float("nan"), -1.0, 2.0]))
