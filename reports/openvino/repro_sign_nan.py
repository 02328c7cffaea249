"""OpenVINO's sign of NaN is NaN; torch's is 0 (``torch.sign`` is ``(0 < x) - (x < 0)``, false
for NaN both ways), on the CPU in float32 and float64 alike. Both precisions of the CPU plugin
(the f32 hint and the default) give NaN, for a lone NaN as in a long vector: the suites' drawn
sign case on openvino:cpu held NaN at two positions (openvino:default's drawn one held none).

A difference of semantics: OpenVINO's Sign propagates NaN on purpose since
openvinotoolkit/openvino#22040 (2024, "align with PyTorch/numpy"), while torch's own sign(NaN) = 0
is disputed upstream (pytorch/pytorch#41245, open); the PyTorch front end converts aten.sign to
Sign without torch's NaN rule. openvino 2026.4.1, torch 2.14.1.
    .venv/bin/python reports/openvino/repro_sign_nan.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class Sign(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sign(x)


check(Sign(), torch.tensor([float("nan"), -2.0, 0.0, 3.0]))
