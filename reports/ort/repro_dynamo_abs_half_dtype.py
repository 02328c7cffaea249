"""The dynamo ONNX exporter (ort:dynamo) returns ``torch.abs`` of a float16 tensor as float32:
eager keeps float16; the exported graph casts the input up to float32 (the exporter's type
promotion pass computes ``abs``, whose rule is ``COMPLEX_TO_FLOAT``, in float32: op math) and
does not cast the result back. ``relu`` and ``neg`` keep float16; the TorchScript exporter
(ort:cpu) keeps float16. The sixth fuzz campaign's ``9e2ae666f290`` (docs/fuzzing.md); the same
symptom as ``torch.sum``'s in ``repro_dynamo_sum_half_dtype.py``, through another pass.

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_abs_half_dtype.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class AbsHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x.to(torch.float16))


check(AbsHalf(), torch.tensor([0.0, -1.5, 2.25]))
