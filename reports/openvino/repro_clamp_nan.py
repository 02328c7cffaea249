"""OpenVINO's clamp drops NaN: ``torch.clamp(x, -2, 2)`` of NaN is NaN in torch and the bound
-2 compiled by OpenVINO's CPU plugin (``relu6`` gives 0 and ``hardtanh`` -1 likewise), in float32
(the f32 hint, openvino:cpu) as at the default precision (openvino:default): the front end's
Clamp is a min / max pair that returns the bound. IREE and TVM share the deviation
(reports/iree/repro_clamp_nan.py, reports/tvm/repro_clamp_nan.py). The suites' relu6 and
hardtanh cases on openvino:default drew NaN inputs; openvino:cpu's drawn examples held none.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_clamp_nan.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class Clamp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -2.0, 2.0)


check(Clamp(), torch.tensor([float("nan"), -1.0, 0.5, 7.0]))
