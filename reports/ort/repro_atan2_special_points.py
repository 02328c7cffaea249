"""Both ONNX exporters lower ``torch.atan2`` through ``Atan(y / x)`` and get its special points
wrong: ``atan2(±0, ±0)`` and ``atan2(inf, inf)`` are NaN through the TorchScript exporter
(ort:cpu), 0 through the dynamo one (ort:dynamo, which maps the NaN to 0), where torch gives
±0 / ±pi and pi / 4. ``atan2(1, 0)`` is right on both. The sixth fuzz campaign's
``b525824b6740`` (ort:cpu, docs/fuzzing.md).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: pytorch/pytorch#162570 (open, the
TorchScript exporter's NaN); microsoft/onnxscript#2557 (open, maps the NaN to 0: what ort:dynamo
shows, still wrong for -0.0, pi and pi / 4).
    .venv/bin/python reports/ort/repro_atan2_special_points.py      # exits 1 while any deviates
"""
import torch
from ort_compiled import check


class Atan2(torch.nn.Module):
    def forward(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.atan2(y, x)


inf = float("inf")
check(Atan2(), torch.tensor([0.0, -0.0, 0.0, inf, 1.0]), torch.tensor([0.0, 0.0, -0.0, inf, 0.0]))
