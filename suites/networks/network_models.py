"""The networks the suite verifies, built with random seeded weights.

The seeds' networks (the MNIST quickstart ``Net`` of seed 001, the fused chapter's ``TestModel``
of seed 000), an LSTM classifier, and the models people run today: a GPT-style decoder and a
BERT-style encoder (small configurations; torchvision's ViT-B/16 and MobileNetV3 come from
``torchvision.models``).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def trained_like(model: nn.Module) -> nn.Module:
    """Batch-norm statistics and affine parameters away from their initial (identity-like)
    values, as after training: otherwise folding them into convolutions (fused mode) is a
    no-op and the fused numerics go unchecked."""
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
            if bn.affine:
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)
    return model


class Net(nn.Module):
    """The MNIST quickstart network of seed 001, for ``side`` x ``side`` images (the seed's 28;
    ``fc1`` takes the 64 channels of the pooled ``(side - 4) / 2`` square)."""

    def __init__(self, side: int = 28) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64 * ((side - 4) // 2) ** 2, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        return F.log_softmax(x, dim=1)


class TestModel(nn.Module):
    """The fused-inference example network of seed 000."""

    __test__ = False  # not a pytest test class

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        conv1 = nn.Conv2d(in_channels, 16, 3, 1, 0, 1, 1, bias=False)
        self.block1 = nn.Sequential(conv1, nn.BatchNorm2d(16, affine=False), nn.ReLU(inplace=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block1(x)
        z = y + y
        return torch.transpose(F.max_pool2d(z, 2, stride=None), 0, 3)


class LstmModel(nn.Module):
    """A sequence classifier: a 2-layer LSTM and a linear head on the last step."""

    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention(is_causal=True)``."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


class DecoderBlock(nn.Module):
    """A pre-LayerNorm transformer block: causal attention, then a GELU MLP, each residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GptDecoder(nn.Module):
    """A GPT-style language model: token + learned position embeddings, pre-LN causal blocks,
    a final LayerNorm and an LM head tied to the token embedding; returns the logits."""

    def __init__(self, vocab: int = 512, width: int = 64, heads: int = 4, layers: int = 2,
                 max_length: int = 64) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(max_length, width)
        self.blocks = nn.Sequential(*(DecoderBlock(width, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.tokens.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(positions)
        return self.lm_head(self.ln_f(self.blocks(x)))


class BertEncoder(nn.Module):
    """A BERT-style encoder: token + position embeddings with LayerNorm, post-LN
    ``nn.TransformerEncoderLayer``s (GELU), and the tanh pooler on the first token; returns
    the sequence output and the pooled output."""

    def __init__(self, vocab: int = 512, width: int = 64, heads: int = 4, layers: int = 2,
                 max_length: int = 64) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(max_length, width)
        self.ln = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(width, width)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(ids.shape[1], device=ids.device)
        hidden = self.encoder(self.ln(self.tokens(ids) + self.positions(positions)))
        return hidden, torch.tanh(self.pooler(hidden[:, 0]))
