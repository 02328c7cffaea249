"""Transformer models of the fusion tests: the standard attention block; the networks suite's
GPT-style decoder and BERT-style encoder."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class AttentionBlock(nn.Module):
    """``LayerNorm -> Linear(qkv) -> causal SDPA -> transpose(1, 2).reshape(B, T, D) -> Linear``."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(self.norm(x)).reshape(batch, tokens, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, tokens, dim))


def suite_networks() -> types.ModuleType:
    """``suites/networks/network_models.py``: the GPT-style decoder and BERT-style encoder the
    networks suite verifies (loaded by path: the suites are not a package)."""
    path = Path(__file__).resolve().parents[2] / "suites" / "networks" / "network_models.py"
    spec = importlib.util.spec_from_file_location("suite_network_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeded(model: nn.Module, seed: int = 0) -> nn.Module:
    """``model`` in eval mode with weights drawn from ``seed`` (LayerNorm affine too)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.2)
    return model.eval()
