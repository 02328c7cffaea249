"""Fusion capture against torch's own ``export(...).run_decompositions({})``, side by side.

Capture (``mluverify.device.fusion.capture.capture_program``) gives the program torch's
``run_decompositions({})`` gives, but overrides only the CompositeImplicitAutograd ops the graph
reaches instead of all ~500 preservable ones; for the fused runtime (``aten_dialect=False``) it
also skips the retrace where the retrace would give the same graph back (docs/fusion.md, "How a
model is fused"). Every ``mlu:cnml`` case captures at least once, so this is most of a small
fused case's cost. Target: at most 0.5x torch's time for the op-sized models. Prints medians of
paired runs and their ratios per model: the offline program's capture (ATen dialect) and the
fused runtime's.
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
    print(f"{'model':28} {'offline':>10} {'fused':>10} {'torch':>10} {'offline/torch':>14} {'fused/torch':>12}")
    for name, (model, inputs) in models.items():
        repeats = 3 if "ResNet" in name else 7
        torchs = lambda: torch.export.export(model, inputs, strict=False).run_decompositions({})  # noqa: E731
        offline, torch_a = paired_medians(lambda: capture_program(model, inputs, lambda t: t), torchs, repeats=repeats)
        fused, torch_b = paired_medians(lambda: capture_program(model, inputs, lambda t: t, aten_dialect=False),
                                        torchs, repeats=repeats)
        print(f"{name:28} {offline * 1e3:8.1f}ms {fused * 1e3:8.1f}ms {torch_a * 1e3:8.1f}ms "
              f"{offline / torch_a:13.2f}x {fused / torch_b:11.2f}x")
    print("target: at most 0.5x for the op-sized models")


if __name__ == "__main__":
    main()
