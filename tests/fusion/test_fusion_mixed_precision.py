"""A fused group that mixes float32 and float16 values keeps each output's own dtype.

Found by ``mluverify fuzz`` (issue 29): ``relu(x)`` beside ``relu(x.to(float16))`` on the fused
(``cnml``) mode returned both outputs as float16, since the group took the narrowest dtype among
its values for every output."""
from __future__ import annotations

import torch
from torch import nn

from mluverify.device.fusion import fuse


class _BesideACast(nn.Module):
    """A float32 result beside a float16 one, and float16/float32 promotion (float32)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        half = x.to(torch.float16)
        return torch.relu(x), torch.relu(half), torch.maximum(half, x)


def test_a_group_with_a_cast_to_float16_keeps_its_float32_outputs():
    x = torch.tensor([0.5, -1.25, 3.0])
    expected = _BesideACast()(x)
    fused = fuse(_BesideACast().to("mlu"), (x.to("mlu"),))
    outputs = [out.cpu() for out in fused(x.to("mlu"))]
    assert [out.dtype for out in outputs] == [torch.float32, torch.float16, torch.float32]
    # Every value is exact in float16, so each output equals the CPU's bit for bit.
    for out, want in zip(outputs, expected):
        assert torch.equal(out, want)
