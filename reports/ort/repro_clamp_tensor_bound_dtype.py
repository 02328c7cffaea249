"""The TorchScript ONNX exporter (ort:cpu) returns ``torch.clamp(i, min=t)`` of an int64 tensor
``i`` and a float32 bound ``t`` as int64: eager promotes to float32 (a tensor bound takes part in
type promotion), the exported model keeps the first operand's dtype. The dynamo exporter
(ort:dynamo) is right. The seventh fuzz campaign's ``7465e77ef164`` (``argmin ->
clamp_min_tensor``, docs/fuzzing.md); the class of ``d3d31a8d52cb`` (``minimum``'s promotion).

onnxruntime 1.32.0, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_clamp_tensor_bound_dtype.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class ClampIntByFloat(torch.nn.Module):
    def forward(self, x: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
        return torch.clamp(torch.argmin(x, dim=0, keepdim=True), min=bound)


check(ClampIntByFloat(), torch.tensor([0.5, 0.1]), torch.tensor([0.25]))
