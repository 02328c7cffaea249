"""A model script for ``mluverify tune`` whose model reads its first input for its shape alone
(``ShapeOfFirst``), so both int8 runtimes' exported models drop that input. Defines what
``mluverify tune`` reads from a model script."""
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from int8_models import ShapeOfFirst  # noqa: E402


def model() -> nn.Module:
    return ShapeOfFirst()


def calibration_inputs() -> list[tuple]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.zeros(8, 1), torch.randn(8, 3, 16, 16, generator=generator)) for _ in range(3)]


def eval_inputs() -> tuple:
    return torch.zeros(8, 1), torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(2))
