"""OpenVINO's floor_divide of int64 tensors truncates, and loses values beyond int32: torch's
``floor_divide([-7, -1, -(2**40) - 1], [2, 3, 3])`` is ``[-4, -1, -366503875926]``, OpenVINO's CPU
plugin gives ``[-3, 0, 0]`` (a negative quotient rounded toward zero; an int64 operand beyond the
int32 range comes out 0: the plugin computes integers in 32 bits, as the fuzzer's int64 cast
finding, openvinotoolkit/openvino#35896), on both precisions.

openvino 2026.4.1, torch 2.14.1. Upstream: the int64 narrowing is openvinotoolkit/openvino#35896;
the truncating floor division not found reported.
    .venv/bin/python reports/openvino/repro_floor_divide_int64.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class FloorDivide(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.floor_divide(x, y)


check(FloorDivide(), torch.tensor([-7, -1, -(2**40) - 1]), torch.tensor([2, 3, 3]))
