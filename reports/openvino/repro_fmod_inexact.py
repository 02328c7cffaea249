"""OpenVINO's CPU plugin computes float32 ``torch.fmod(a, b)`` inexactly: ``fmod(1.0, 0.1)`` is 0.0
where torch (C's ``fmod``, exact) gives 0.0999999866, ``fmod(7.0, 0.7)`` is 0.0 against 1.19e-7
(as ``a - trunc(a / b) * b`` in float32 gives: ``1.0 / 0.1`` rounds up to 10); both precisions
(``openvino:cpu`` and ``openvino:default``). Quotients not beside an integer are right. The
seventh fuzz campaign's ``e8f5f613997d`` (docs/fuzzing.md); IREE's ``88a7c62a525b`` is the same.

openvino 2026.4, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_fmod_inexact.py      # exits 1 while it holds
"""
import torch
from openvino_compiled import check


class Fmod(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.fmod(a, b)


check(Fmod(), torch.tensor([1.0, 7.0, -1.0, 5.5]), torch.tensor([0.1, 0.7, 0.1, 2.0]))
