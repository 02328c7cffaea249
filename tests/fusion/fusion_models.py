"""Models of the fusion tests: the seeds' TestModel and a model that cannot be captured."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

QCONFIG = {"use_ave": False, "data_scale": 1.0, "mean": None, "std": None, "firstconv": False}


class TestModel(nn.Module):
    """The seeds' network (fused-inference chapter): conv, batch-norm, relu, add, pool, transpose."""

    __test__ = False  # not a pytest test class

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        conv1 = nn.Conv2d(in_channels, 16, 3, 1, 0, 1, 1, bias=False)
        bn1 = nn.BatchNorm2d(16, affine=False)
        self.block1 = nn.Sequential(conv1, bn1, nn.ReLU(inplace=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block1(x)
        z = y + y
        z1 = F.max_pool2d(z, 2, stride=None)
        return torch.transpose(z1, 0, 3)


def make_test_model(in_channels: int = 3, seed: int = 0) -> TestModel:
    """A TestModel in eval mode whose batch-norm statistics are not the identity, so that
    folding them into the convolution changes the weights."""
    generator = torch.Generator().manual_seed(seed)
    model = TestModel(in_channels).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
        bn = model.block1[1]
        bn.running_mean.copy_(torch.randn(16, generator=generator) * 0.5)
        bn.running_var.copy_(torch.rand(16, generator=generator) * 2 + 0.25)
    return model


def quantized_on_mlu(model: nn.Module, dtype: str, calibration: torch.Tensor) -> nn.Module:
    """The seeds' quantization flow: calibrate on the CPU, load the checkpoint, move to mlu."""
    from mluverify.device.quantization import quantize_dynamic_mlu

    calibrated = quantize_dynamic_mlu(copy.deepcopy(model), QCONFIG, dtype=dtype, gen_quant=True)
    calibrated(calibration)
    deployed = quantize_dynamic_mlu(copy.deepcopy(model))
    deployed.load_state_dict(calibrated.state_dict())
    return deployed.to("mlu")


class DataDependent(nn.Module):
    """Branches on a tensor's value: torch.export cannot capture it as one graph."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if y.sum() > 0:
            return torch.relu(y)
        return -y


class WithCumsum(nn.Module):
    """cumsum is not fusible, and the device has no kernel for it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cumsum(self.conv(x), dim=1))
