"""IREE computes ``torch.nn.functional.rms_norm(x, shape)`` without ``eps`` (None: torch then uses
float32's machine epsilon) as NaN for a row of zeros, where torch gives zeros: ``0 * rsqrt(mean(0)
+ eps)`` is 0 with eps = 1.19e-7, ``0 * rsqrt(0)`` is ``0 * inf``, NaN, as if eps were 0. Other
rows are right. The seventh fuzz campaign's ``6ccb0fe52754`` (docs/fuzzing.md).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found
reported.
    .venv/bin/python reports/iree/repro_rms_norm_zero_row.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class RmsNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, [x.shape[-1]])


check(RmsNorm(), torch.tensor([[0.0, 0.0], [1.0, 2.0]]))
