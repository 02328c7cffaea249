"""OpenVINO's CPU plugin saturates an int8 ``torch.square`` at 127 where torch wraps: ``127 ** 2``
is 1 in torch (16129 modulo 256, as a C ``int8_t`` product cast back), ``12 ** 2`` is -112, ``100
** 2`` is 16; OpenVINO gives 127 for each, in both precisions (``openvino:cpu`` and
``openvino:default``). The seventh fuzz campaign's ``3511f058a2ae`` (``to_int(int8) -> square``,
docs/fuzzing.md).

openvino 2026.4, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_int8_square_saturates.py      # exits 1 while it holds
"""
import torch
from openvino_compiled import check


class Square(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.square(x)


check(Square(), torch.tensor([127, -128, 12, 100, 5], dtype=torch.int8))
