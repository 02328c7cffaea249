"""Fused execution (issue 5) as a user relies on it, checked through the harness's records.

On ``mlu:cnml`` (fused, policy 2 %): a forced-fallback op (``DEBUG_FORCED_FALLBACK_OPS``) joins
no group and the result stays within tolerance; an op the device lacks falls back to the CPU and
the record names it (a model that cannot be captured is status ``not_fused``: tests/judging).
With ``fuse()``: fusion off equals layer by layer bit for bit, and
compiled groups are cached by input signature.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.mlu_targets("mlu:cnml")


class ConvBlock(nn.Module):
    """conv + batch-norm + relu, a residual add, pooling: the seeds' TestModel with a skip."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        return F.max_pool2d(self.head(y) + x, 2)


class WithCumsum(ConvBlock):
    """ConvBlock followed by an op the device has no kernel for (``cumsum``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(super().forward(x), dim=-1)


def _model(cls: type) -> nn.Module:
    torch.manual_seed(0)
    model = cls().eval()
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    return model


def _input() -> torch.Tensor:
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("dtype", ("float32", "float16"))
def test_forced_fallback_op_joins_no_group_and_stays_within_tolerance(verify, monkeypatch, dtype: str) -> None:
    from mluverify.device import fuse, fusion_summary

    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor")
    verify(_model(ConvBlock), _input(), op="conv_block_forced_add_fallback", dtype=dtype)
    fused = fuse(_model(ConvBlock).to("mlu"), (_input().to("mlu"),))
    fused(_input().to("mlu"))
    summary = fusion_summary(fused)
    assert summary.groups and all("aten::add.Tensor" not in group.ops for group in summary.groups), summary
    assert any(f.op == "aten::add.Tensor" and f.runs_on == "cnnl" for f in summary.fallbacks), summary.fallbacks


def test_op_without_device_kernel_is_recorded_as_cpu_fallback(verify, records) -> None:
    verify(_model(WithCumsum), _input(), op="conv_block_cumsum")
    assert "aten::cumsum" in records[-1]["fallback_ops"], records[-1]["fallback_ops"]


def test_fusion_off_equals_layer_by_layer_and_groups_are_cached(mlu_target) -> None:
    from mluverify.device import fuse, fusion_summary, kernel_mode, mlu_model

    model, x = _model(ConvBlock).to("mlu"), _input().to("mlu")
    with torch.no_grad(), kernel_mode("cnnl"):
        layer_by_layer = model(x).cpu()
    fused = fuse(model, (x,))
    try:
        mlu_model._jit_override_can_fuse_on_mlu(False)
        with torch.no_grad():
            unfused = fused(x).cpu()
    finally:
        mlu_model._jit_override_can_fuse_on_mlu(True)
    assert torch.equal(unfused, layer_by_layer)
    with torch.no_grad():
        fused(x), fused(x), fused(torch.randn(1, 3, 8, 8).to("mlu"))
    cache = fusion_summary(fused).cache
    assert (cache.hits, cache.misses) == (2, 2), cache
