"""IREE's float32 sin and cos of a huge argument are +-inf: ``torch.sin(3.4028235e38)`` is
-0.5219 in torch (and libm) and -inf compiled by IREE, ``torch.cos`` of it 0.8530 and -inf; a
sin / cos is at most 1 in magnitude for every finite input (the range reduction fails for
arguments this large).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_sin_cos_large.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class SinCos(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.sin(x), torch.cos(x)])


check(SinCos(), torch.tensor([3.4028235e38, -3.4028235e38, 1e30, 1.0]))
