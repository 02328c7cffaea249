"""The dynamo ONNX exporter (ort:dynamo) returns ``torch.abs`` of a float16 tensor as float32:
eager keeps float16; the exported graph casts the input up to float32 (the exporter's type
promotion pass computes ``abs``, whose rule is ``COMPLEX_TO_FLOAT``, in float32: op math); the
cast back that pass inserts is lost because the ONNX outputs are taken by the exported program's
stale signature names (``repro_dynamo_half_output_cast_dropped.py`` shows why, and that
``torch.sum``'s float32 result in ``repro_dynamo_sum_half_dtype.py`` has the same cause).
``relu`` and ``neg`` keep float16; the TorchScript exporter (ort:cpu) keeps float16. The sixth
fuzz campaign's ``9e2ae666f290`` (docs/fuzzing.md).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_abs_half_dtype.py      # exits 1 while it holds
"""
import torch
from ort_compiled import check


class AbsHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x.to(torch.float16))


check(AbsHalf(), torch.tensor([0.0, -1.5, 2.25]))
