"""OpenVINO's CPU plugin cannot compile a float16 group_norm of a 2-D input (batch, channels: no
spatial dimensions) at its default precision (bf16 on CPUs with AMX / AVX512-BF16) with the input
shapes fixed, as the plugin runs it: ``compile_model`` raises ``LoopPort dim_idx (1) must be less
than the corresponding expression port shape rank (1)`` (the suites' float16 affine case on
openvino:default). float32, and float16 with the f32 hint, compile and agree with torch; with
dynamic shapes every dtype raises ``Unsupported operation of type: GroupNormalization``. torch
normalises each group of channels. A limitation (the case errors).

openvino 2026.4.1, torch 2.14.1.
    .venv/bin/python reports/openvino/repro_group_norm_2d.py      # exits 1 while it does not compile or differs
"""
import sys

import torch
import torch.nn.functional as F
from openvino_compiled import run


class GroupNorm(torch.nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.groups, weight, bias, eps=1e-5)


args = (torch.tensor([[1.0, -3.0], [2.0, 5.0]], dtype=torch.float16), torch.ones(2, dtype=torch.float16),
        torch.zeros(2, dtype=torch.float16))
errors = 0
for groups in (1, 2):
    try:
        expected = GroupNorm(groups)(*(a.float() for a in args)).half()
        torch.testing.assert_close(run(GroupNorm(groups), *args, config={}, fixed_shapes=True), expected)
        print(f"float16 group_norm of a (2, 2) input, {groups} group(s): compiles and agrees with torch")
    except Exception as exc:  # the plugin's own error is the finding
        errors += 1
        print(f"float16 group_norm of a (2, 2) input, {groups} group(s): {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
sys.exit(1 if errors else 0)
