"""``torch.ops.aten.native_layer_norm`` of float16 through the dynamo ONNX exporter (ort:dynamo):
the normalized output is float16, as torch's, but the saved mean and reciprocal standard
deviation (outputs 1 and 2) are float32 where torch's CPU kernel returns float16: onnxscript's
lowering is ONNX ``LayerNormalization``, whose ``Mean`` / ``InvStdDev`` outputs take its
``stash_type`` (float32). Only a program that returns the statistics sees it (OpInfo's
``native_layer_norm``; ``F.layer_norm`` returns the normalized output alone). Found when the judge
began checking float16 outputs' dtypes (docs/judging.md).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_layer_norm_stats_dtype.py      # exits 1 while it holds
"""
import sys

import torch
from ort_compiled import run


class LayerNormStatistics(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)[1]  # the mean


x = torch.arange(8, dtype=torch.float16).reshape(2, 4)
expected, got = LayerNormStatistics()(x), run(LayerNormStatistics(), x)
print(f"mean: torch {expected.dtype} {expected.flatten().tolist()}; ort:dynamo {got.dtype} {got.flatten().tolist()}")
sys.exit(1 if got.dtype != expected.dtype else 0)
