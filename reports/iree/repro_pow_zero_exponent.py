"""IREE's float pow gives NaN for a zero exponent on a zero or NaN base: ``torch.pow(0.0, 0.0)``
and ``torch.pow(nan, 0.0)`` are 1 in torch (IEEE 754 pow: x**0 is 1 for every x) and NaN
compiled by IREE (float32 and float16).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_pow_zero_exponent.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class Pow(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.pow(x, y)


check(Pow(), torch.tensor([0.0, float("nan"), 2.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, 1.0]))
