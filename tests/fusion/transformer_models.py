"""Transformer models of the fusion tests: the standard attention block, a GPT-style decoder."""
from __future__ import annotations

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


class DecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attention = AttentionBlock(dim, heads)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(x)
        return x + self.mlp(self.norm(x))


class TinyGPT(nn.Module):
    """Token + position embedding, causal attention layers, final LayerNorm, tied LM head."""

    def __init__(self, vocab: int = 50, context: int = 16, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.layers = nn.Sequential(*(DecoderLayer(dim, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(positions)
        return self.head(self.norm(self.layers(x)))


def seeded(model: nn.Module, seed: int = 0) -> nn.Module:
    """``model`` in eval mode with weights drawn from ``seed`` (LayerNorm affine too)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.2)
    return model.eval()
