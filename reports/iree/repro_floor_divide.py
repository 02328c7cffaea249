"""IREE computes a float floor division as floor(a / b): ``torch.div(1.0, 0.1, rounding_mode="floor")``
is 9 in torch (Python's ``1.0 // 0.1``: the division's exact quotient 9.99999... floors to 9, as
fmod-based floor division gives) and 10 compiled by IREE (1.0 / 0.1 rounds to 10.0 first).
TorchInductor shares the deviation (docs/backends.md, docs/fuzzing.md).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_floor_divide.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class FloorDivide(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.div(x, y, rounding_mode="floor")


check(FloorDivide(), torch.tensor([1.0, -1.0, 5.0]), torch.tensor([0.1, 0.1, -2.0]))
