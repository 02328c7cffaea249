"""The dynamo ONNX exporter (ort:dynamo) drops the broadcast of ``Tensor.copy_``: ``v.copy_(x)``
with ``v`` of shape (2, 5, 2) and ``x`` of shape (1, 2) is ``x`` broadcast to (2, 5, 2) in eager
and ``x`` itself, shape (1, 2), in the exported model. The sixth fuzz campaign's ``d56ce1dbc946``
(a wrong output) and the fifth's ``224a5f53f228`` (a rank error further on) are this lowering
(docs/fuzzing.md); the TorchScript exporter (ort:cpu) has no form of ``aten::copy`` at all.

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_copy_broadcast.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class CopyBroadcast(torch.nn.Module):
    def forward(self, v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return (v * 2.0).copy_(x)


check(CopyBroadcast(), torch.zeros(2, 5, 2), torch.tensor([[-2.5, 2.25]]), targets=("ort:dynamo",))
