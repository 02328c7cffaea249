"""Whole networks in the precisions of the seeds: the MNIST quickstart ``Net`` (001), the fused
chapter's ``TestModel`` (000), torchvision ResNet50 and VGG19 (random seeded weights) and an
LSTM model. Float32 / float16 on every target; int8 weights with float32 activations and int16
weights with float16 activations on the fused target (the seeds' mixed precisions, plus the two
they say work the same way). Full-size ResNet50 / VGG19 cases are ``mlu_heavy``."""
from __future__ import annotations

from typing import Callable, NamedTuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0


class Net(nn.Module):
    """The MNIST quickstart network of seed 001."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(9216, 128)
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


def _torchvision(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None)

    return build


class Network(NamedTuple):
    name: str
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    default: tuple[tuple[str, str], ...] | None = None  # precisions in the default selection; None: all
    make_input: Callable[..., torch.Tensor] = torch.rand  # images in [0, 1); sequences get torch.randn


NETWORKS = (
    Network("mnist_net", Net, (2, 1, 28, 28)),
    Network("test_model", lambda: TestModel(in_channels=3), (1, 3, 224, 224)),
    Network("lstm_model", LstmModel, (2, 12, 32), make_input=torch.randn),
    Network("resnet50_small", _torchvision("resnet50"), (1, 3, 64, 64), default=(("float32", ""), ("float32", "int8"))),
    Network("vgg19_small", _torchvision("vgg19"), (1, 3, 32, 32), default=(("float32", ""),)),
    Network("resnet50", _torchvision("resnet50"), (1, 3, 224, 224), default=()),
    Network("vgg19", _torchvision("vgg19"), (1, 3, 224, 224), default=()),
)

# (dtype of activations, quantized weights): the seeds' float32, float16, int8_float32,
# int16_float16, and float16_int8 / float32_int16 which they say work the same way.
FLOAT_PRECISIONS = (("float32", ""), ("float16", ""))
QUANT_PRECISIONS = (("float32", "int8"), ("float16", "int16"), ("float16", "int8"), ("float32", "int16"))


def _params(precisions: tuple[tuple[str, str], ...]) -> list:
    return [pytest.param(net, dtype, quant, id=f"{net.name}-{dtype}{'-' + quant if quant else ''}",
                         marks=[] if net.default is None or (dtype, quant) in net.default else [pytest.mark.mlu_heavy])
            for net in NETWORKS for dtype, quant in precisions]


def _trained_like(model: nn.Module) -> nn.Module:
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


def _model_and_input(net: Network) -> tuple[nn.Module, torch.Tensor]:
    """The network with seeded weights (batch-norm as after training), in eval mode, and a
    seeded input."""
    torch.manual_seed(SEED)
    model = _trained_like(net.build()).eval()
    return model, net.make_input(net.input_shape)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")  # the seed's Net applies Dropout2d to 2-D input
@pytest.mark.parametrize("net, dtype, quant", _params(FLOAT_PRECISIONS))
def test_network(verify, net: Network, dtype: str, quant: str) -> None:
    model, x = _model_and_input(net)
    verify(model, x, op=net.name, dtype=dtype, seed=SEED)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")
@pytest.mark.mlu_targets("mlu:cnml")
@pytest.mark.parametrize("net, dtype, quant", _params(QUANT_PRECISIONS))
def test_quantized_network(verify, net: Network, dtype: str, quant: str) -> None:
    model, x = _model_and_input(net)
    verify(model, x, op=net.name, dtype=dtype, quant=quant, seed=SEED)
