"""IREE computes float32 ``torch.fmod(a, b)`` as ``a - trunc(a / b) * b`` in float32, not exactly:
``fmod(1.0, 0.1)`` is 0.0 where torch (C's ``fmod``, exact) gives 0.0999999866 (``1.0 / 0.1`` rounds
up to 10 in float32, the exact quotient of the float32 values is 9.99999985); ``fmod(7.0, 0.7)``
is 0.0 against 1.19e-7. Quotients that are not beside an integer are right. The seventh fuzz
campaign's ``88a7c62a525b`` (docs/fuzzing.md); OpenVINO's ``e8f5f613997d`` is the same.

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found
reported.
    .venv/bin/python reports/iree/repro_fmod_inexact.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class Fmod(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.fmod(a, b)


check(Fmod(), torch.tensor([1.0, 7.0, -1.0, 5.5]), torch.tensor([0.1, 0.7, 0.1, 2.0]))
