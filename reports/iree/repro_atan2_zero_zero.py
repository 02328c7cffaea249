"""IREE's float32 atan2 is NaN where both operands are zero or both infinite: ``torch.atan2(0.0,
0.0)`` is 0 in torch (C's atan2: ±0 or ±pi by the zeros' signs), ``atan2(inf, inf)`` is pi / 4;
compiled by IREE both are NaN. Other points (``atan2(1, 0)``, ``atan2(1, -inf)``, tiny equal
operands) are right. The sixth fuzz campaign's ``aaadcabdb579`` (docs/fuzzing.md).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found
reported (XLA's CPU and GPU compilers had the same, openxla/xla#44705, closed).
    .venv/bin/python reports/iree/repro_atan2_zero_zero.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class Atan2(torch.nn.Module):
    def forward(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.atan2(y, x)


inf = float("inf")
check(Atan2(), torch.tensor([0.0, -0.0, 0.0, inf, -inf, 1.0, 1.0, 1e-30]),
      torch.tensor([0.0, 0.0, -0.0, inf, inf, 0.0, -inf, 1e-30]))
