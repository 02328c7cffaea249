"""A small CNN with one planted bad layer for ``mluverify tune --target ort:int8``: ``conv3``'s
weights for input channel 0 are 300 times the layer's largest weight. That channel is dead
(``conv2``'s filter 0 and its bias make it negative everywhere, so the ReLU zeroes it), so the
float network is unchanged; but a per-tensor int8 weight scale is then set by the outliers: its
step, 300 / 127 ~ 2.4 times the largest of the other weights, rounds every other weight of the
layer to 0, and the layer's output is lost. Each other layer's int8 error is far below 2 %.

Defines what ``mluverify tune`` reads from a model script."""
import torch
import torch.nn as nn

PLANTED = "conv3"
FACTOR = 300.0


def model(planted: bool = True) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential()
    for index, (inputs, outputs) in enumerate([(3, 16), (16, 16), (16, 16), (16, 16)], start=1):
        net.add_module(f"conv{index}", nn.Conv2d(inputs, outputs, 3, padding=1))
        net.add_module(f"relu{index}", nn.ReLU())
    net.add_module("pool", nn.AdaptiveAvgPool2d(1))
    net.add_module("flatten", nn.Flatten())
    net.add_module("fc", nn.Linear(16, 10))
    if planted:
        with torch.no_grad():
            net.conv2.weight[0] = 0.0
            net.conv2.bias[0] = -1.0  # channel 0 of conv3's input: ReLU(-1) = 0 everywhere
            net.conv3.weight[:, 0] = FACTOR * net.conv3.weight.abs().max()
    return net.eval()


def calibration_inputs():
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(8, 3, 16, 16, generator=generator) for _ in range(2)]


def eval_inputs():
    return torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(2))
