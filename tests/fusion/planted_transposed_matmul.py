"""A plugin planting a fused-only layout bug: the fused mode's (cnml) batched matrix product is
3 % too large when an operand is a transposed view (attention's ``q @ k^T``); the layer-by-layer
(cnnl) kernel is right. Loaded with ``-p planted_transposed_matmul``, like any mluverify plugin."""
from __future__ import annotations

from mluverify import hookimpl


def transposed(t) -> bool:
    """Column-major in its last two dims: what ``transpose`` of a contiguous matrix gives."""
    return t.dim() >= 2 and t.size(-1) > 1 and t.size(-2) > 1 and t.stride(-2) == 1 and t.stride(-1) != 1


def _bmm_off_on_transposed(self, mat2):
    import torch

    out = torch.ops.aten.bmm.default(self, mat2)
    return out * 1.03 if transposed(self) or transposed(mat2) else out


@hookimpl
def mluverify_device_kernels(registry) -> None:
    registry.register("aten::bmm", _bmm_off_on_transposed, mode="cnml")
