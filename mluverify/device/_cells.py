"""LSTM / GRU cells under ``torch.backends.mlufusion`` (seed 002: "目前支持融合模式的算子有lstm").

On an accelerator torch runs each LSTM / GRU step as one fused cell op
(``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``). Registered for ``mlu`` at the autograd
key, this decides what that op is:

* flag on (the default): the one fused op, the device's kernel for it (inference only: the
  fused cell has no backward, so a backward through it raises, naming the flag);
* flag off: the cell's separate ops — the cell's kernel, written in torch ops, called on the
  device tensors — each dispatched (seen by dispatch modes such as the Dumper, queued, traced
  by autograd: an LSTM on the device then also trains).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

CELLS = ("_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")
_library = torch.library.Library("aten", "IMPL")


def _fused_cell(name: str) -> type[torch.autograd.Function]:
    """The fused op as an autograd function whose backward says how to train instead."""
    op = getattr(torch.ops.aten, name).default

    class FusedCell(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset: torch._C.DispatchKeySet, *args: Any) -> Any:
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

        @staticmethod
        def backward(ctx, *grads: Any) -> Any:
            raise NotImplementedError(
                f"aten::{name} ran on the MLU as one fused op, which has no backward: to train an LSTM / "
                f"GRU on the device call torch.backends.mlufusion.set_flags(False) (each cell then runs "
                f"as its separate ops)")

    return FusedCell


def _cell_impl(name: str) -> Callable:
    fused = _fused_cell(name)

    def impl(keyset: torch._C.DispatchKeySet, *args: Any) -> Any:
        from mluverify.device import kernel_registry
        from mluverify.device.fusion.settings import lstm_fusion_enabled

        cell_ops = kernel_registry().kernel(f"aten::{name}")
        if not lstm_fusion_enabled() and cell_ops is not None:
            return cell_ops(*args)
        return fused.apply(keyset, *args)

    return impl


def register() -> None:
    for name in CELLS:
        _library.impl(name, _cell_impl(name), "AutogradPrivateUse1", with_keyset=True)
