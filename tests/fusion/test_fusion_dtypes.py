"""The fused engine computes in float16 / float32 only (seed 000: "非权重算子：float16、float32"): an
op computing int64 or bool from the model's inputs (a token model's ids and attention mask) stays
out of the groups and runs per op; one that reads no input (``arange`` of a static length, the
position ids) is a constant of the engine and stays fused."""
from __future__ import annotations

import torch
from torch import nn

from mluverify.device.fusion import fuse, fusion_summary
from mluverify.device.fusion.program import Fallback

INT64 = "computes int64: the fused engine's non-weight ops take float16 / float32 only"


class ShiftedIds(nn.Module):
    """Token ids shifted by one (int64 arithmetic on the input) and position ids (a constant)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(10, 4), nn.Embedding(6, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return torch.relu(self.tokens(ids + 1) + self.positions(positions))


def test_int64_arithmetic_on_the_inputs_runs_outside_the_groups_and_the_position_ids_inside():
    torch.manual_seed(0)
    model, ids = ShiftedIds().eval(), torch.randint(0, 9, (2, 6))
    expected = model(ids)
    fused = fuse(model.to("mlu"), (ids.to("mlu"),))
    output = fused(ids.to("mlu")).cpu()
    summary = fusion_summary(fused)
    # the int64 add runs per op on the device (CNNL), as the seed's fallback says
    assert summary.fallbacks == (Fallback("aten::add.Tensor", "cnnl", INT64, 1),)
    # the position ids' arange (no input read) and the float add of the embeddings are fused
    assert [group.ops for group in summary.groups] == [
        ("aten::arange", "aten::embedding", "aten::embedding", "aten::add.Tensor", "aten::relu")]
    assert summary.executed_as == "partially fused"
    assert torch.equal(output, expected)  # gathers, one float add, relu: exact


class LeakyByMask(nn.Module):
    """A comparison of floats (a bool result) selecting between floats."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, 0.5 * x)


def test_a_comparison_of_floats_computes_in_float_and_stays_fused():
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    fused = fuse(LeakyByMask().to("mlu"), (x.to("mlu"),))
    output = fused(x.to("mlu")).cpu()
    summary = fusion_summary(fused)
    assert (summary.executed_as, summary.fallbacks) == ("fused", ())
    assert torch.equal(output, torch.where(x > 0, x, 0.5 * x))


class GatherByConstantIds(nn.Module):
    """Position ids computed from no input (a group of constants), then used by an op the engine
    does not fuse (integer-tensor indexing), as the Hugging Face encoders' masks are."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids = torch.arange(x.shape[1], device=x.device).flip(0) * 1
        return torch.relu(x[:, ids])


def test_a_group_reading_no_input_gives_device_tensors_to_the_ops_after_it():
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(2))
    fused = fuse(GatherByConstantIds().to("mlu"), (x.to("mlu"),))
    output = fused(x.to("mlu"))
    summary = fusion_summary(fused)
    # the constants' group ran in the engine and its ids met the device input on the device: no
    # mixed-device error demoting the program to layer by layer
    assert summary.executed_as == "partially fused"
    assert summary.not_fused_reason.startswith("ran op by op between the fusion groups: aten::flip")
    assert output.device.type == "mlu" and torch.equal(output.cpu(), torch.relu(x[:, torch.arange(5).flip(0)]))
