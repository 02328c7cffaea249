"""``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` of float16 operands through the
TorchScript exporter (ort:cpu): the exported attention returns float32 where torch returns
float16 (the causal mask is built and added in float32, promoting the scores); without
``is_causal`` it stays float16. In a network the float32 result then meets float16 again: the
suites' ``gpt_decoder`` in float16 (causal attention, then a residual add and a LayerNorm)
exports to a model ONNX Runtime refuses to load ("Type parameter (T) of Optype
(LayerNormalization) bound to different types (tensor(float) and tensor(float16)"). The dynamo
exporter (ort:dynamo) keeps float16.

onnxruntime 1.32.0, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_sdpa_causal_half_dtype.py      # exits 1 while the deviation is there
"""
import sys

import torch
import torch.nn.functional as F
from ort_compiled import run


class CausalAttention(torch.nn.Module):
    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)


q = torch.randn(2, 4, 16, 16).half()
dtypes = {target: run(CausalAttention(), q, target=target).dtype for target in ("ort:cpu", "ort:dynamo")}
print(f"torch: {CausalAttention()(q).dtype}; " + "; ".join(f"{t}: {d}" for t, d in dtypes.items()))
sys.exit(1 if any(d != torch.float16 for d in dtypes.values()) else 0)
