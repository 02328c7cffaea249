"""The dynamo ONNX exporter (ort:dynamo) returns ``torch.sum`` of a float16 tensor as float32:
eager keeps float16 (it accumulates in float32 and rounds back), the exported model accumulates
in float32 and does not cast back (the cast is inserted, then lost:
``repro_dynamo_half_output_cast_dropped.py``). The TorchScript exporter (ort:cpu) keeps float16.
The sixth fuzz campaign's ``63af4d3c1d45`` (docs/fuzzing.md).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_sum_half_dtype.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class SumHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x.to(torch.float16))


check(SumHalf(), torch.tensor([0.5, 1.25, -3.0]))
