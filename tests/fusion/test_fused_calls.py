"""``track_fused_calls()``: every fused call made in a block reports how it ran."""
import torch
from torch import nn

from mluverify.device import mlu_model
from mluverify.device.fusion import track_fused_calls


def _traced_on_mlu() -> tuple[torch.jit.ScriptModule, torch.Tensor]:
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU()).eval()
    x = torch.randn(3, 6)
    return torch.jit.trace(model, x).to("mlu"), x.to("mlu")


def test_each_fused_call_in_the_block_is_reported_with_how_it_ran():
    traced, x = _traced_on_mlu()
    traced(x)  # outside any block: reported to none
    with track_fused_calls() as outer:
        traced(x)
        with track_fused_calls() as inner:
            mlu_model._jit_override_can_fuse_on_mlu(False)
            try:
                traced(x)
            finally:
                mlu_model._jit_override_can_fuse_on_mlu(True)
        x.relu()  # an eager op is no fused call
    assert [call.executed_as for call in outer] == ["fused", "layer-by-layer"]
    assert [call.executed_as for call in inner] == ["layer-by-layer"]
    assert "_jit_override_can_fuse_on_mlu(False)" in inner[0].not_fused_reason
