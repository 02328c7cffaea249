"""Fusion capture against torch's own ``export(...).run_decompositions({})``, side by side.

Capture (``mluverify.device.fusion.capture.capture_program``) gives the program torch's
``run_decompositions({})`` gives, but overrides only the CompositeImplicitAutograd ops the graph
reaches instead of all ~500 preservable ones (docs/fusion.md, "How a model is fused"). Every
``mlu:cnml`` case captures at least once, so this is most of a small fused case's cost.
Target: at most 0.5x torch's time for the op-sized models. Prints medians of paired runs and
their ratio per model.
Run: PYTHONPATH=. .venv/bin/python benchmarks/capture_cost.py
"""
from __future__ import annotations

import torch
import torchvision
from torch import nn

from benchmarks.quant_resnet50 import paired_medians
from mluverify.device.fusion.capture import capture_program


class Unary(nn.Module):
    """What an op-suite case fuses: one element-wise op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def main() -> None:
    torch.manual_seed(0)
    models = {
        "tanh (an op case)": (Unary(), (torch.randn(4, 16),)),
        "Linear + LayerNorm + GELU": (nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU()).eval(),
                                      (torch.randn(8, 64),)),
        "ResNet-18 (torchvision)": (torchvision.models.resnet18().eval(), (torch.randn(1, 3, 64, 64),)),
    }
    print(f"{'model':28} {'capture':>10} {'torch':>10} {'ratio':>7}")
    for name, (model, inputs) in models.items():
        ours, torchs = paired_medians(
            lambda: capture_program(model, inputs, lambda t: t),
            lambda: torch.export.export(model, inputs, strict=False).run_decompositions({}),
            repeats=3 if "ResNet" in name else 7)
        print(f"{name:28} {ours * 1e3:8.1f}ms {torchs * 1e3:8.1f}ms {ours / torchs:6.2f}x")
    print("target: at most 0.5x for the op-sized models")


if __name__ == "__main__":
    main()
