"""The dynamo ONNX exporter (ort:dynamo) lowers float ``torch.floor_divide(a, b)`` to ``Floor(a /
b)``: ``-2.1 // inf`` is -0.0 where torch (and Python) give -1.0, and ``1.0 // 0.1`` is 10 where
they give 9 (the exact quotient of the float32 values is 9.99999985; eager floors ``(a - fmod(a,
b)) / b``). Inductor's lowering (pytorch/pytorch#197895) is the same; the TorchScript exporter
(ort:cpu) truncates instead (``c1bc06fccd2e``). The seventh fuzz campaign's ``63ef2d2b50bf``
(docs/fuzzing.md).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: microsoft/onnxscript#989 (open,
the exporter's floor division).
    .venv/bin/python reports/ort/repro_dynamo_floor_divide.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class FloorDivide(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.floor_divide(a, b)


inf = float("inf")
check(FloorDivide(), torch.tensor([-2.1, 2.1, 1.0, 7.5]), torch.tensor([inf, inf, 0.1, 2.0]), targets=("ort:dynamo",))
