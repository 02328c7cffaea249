"""A toy network with two planted layers: ``fc2`` and ``fc4`` are fed an input whose channel 0
is 300 times larger than the others (their weights' column 0 is divided by 300, so the float
network is unchanged in scale). A per-tensor int8 input scale is then set by that channel:
its step, 300 / 127 ~ 2.4, exceeds the other channels' whole range (~1), which all quantize to
0, so each of the two layers alone breaks the 2 % bound; int16 (step 300 / 32767 ~ 0.009) keeps
them. Every other layer sees inputs of range ~1, whose int8 error is far below the bound.

Defines what ``mluverify tune`` reads from a model script (training too: ``train_inputs``, ``loss``)."""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

PLANTED = ("fc2", "fc4")
FACTOR = 300.0
WIDTH = 32


class Outlier(nn.Module):
    """Multiplies channel 0 of the last dimension by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
        scale[0] = self.factor
        return x * scale


def model(planted=PLANTED, depth: int = 6) -> nn.Module:
    torch.manual_seed(0)
    layers = []
    for i in range(1, depth + 1):
        name = f"fc{i}"
        fc = nn.Linear(WIDTH, WIDTH)
        if name in planted:
            with torch.no_grad():
                fc.weight[:, 0] /= FACTOR
            layers.append((f"boost{i}", Outlier(FACTOR)))
        layers += [(name, fc), (f"act{i}", nn.Tanh())]
    return nn.Sequential(OrderedDict(layers)).eval()


def calibration_inputs():
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(16, WIDTH, generator=generator) for _ in range(2)]


def eval_inputs():
    return torch.randn(16, WIDTH, generator=torch.Generator().manual_seed(2))


def train_inputs():
    return eval_inputs(), torch.randint(0, WIDTH, (16,), generator=torch.Generator().manual_seed(3))


def loss(output, target):
    return F.cross_entropy(output, target)
