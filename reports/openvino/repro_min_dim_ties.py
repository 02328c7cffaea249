"""torch.min(x, dim) and torch.max(x, dim) on OpenVINO's CPU plugin return a later index among
tied extrema where torch returns the first (torch's documented rule: "the indices of the first
minimal value are returned"). Only with the inputs fixed to their shapes, as mluverify's plugin
does (left dynamic, the first comes back), in both precisions (the f32 hint and the default,
bf16): exact ties of the input, not a rounding. Over every pair of tied minima in a row of 16, 17
or 24, 36 pairs give the later index, each one whose later index is 4, 8 or 12; a row of 8 agrees;
torch.argmin / torch.argmax agree throughout. The suites' case:
suites/ops/test_reductions.py::test_reduction[float16-openvino:default-min_dim] (48 of 221
indices, a (17, 13, 17) input of seven distinct values reduced over its last dimension).

openvino 2026.4.1, torch 2.14.1.
    .venv/bin/python reports/openvino/repro_min_dim_ties.py   # exits 1 while a tie gives a later index
"""
import sys

import torch
from openvino_compiled import F32, run


class MinIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.min(x, -1).indices


class MaxIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, -1).indices


x = torch.zeros(1, 17)
x[0, 2] = x[0, 13] = -1.0  # the minimum, tied at 2 and 13 (and the negation's maximum)
differ = 0
for module, values in ((MinIndex(), x), (MaxIndex(), -x)):
    expected = module(values)
    for name, config in (("f32 hint", F32), ("default precision", {})):
        got = run(module, values, config=config, fixed_shapes=True)
        differ += int(not torch.equal(got, expected))
        print(f"{type(module).__name__}, {name}: openvino {got.tolist()}, torch {expected.tolist()}")
sys.exit(1 if differ else 0)
