"""The emulated MLU's built-in kernels: the CNNL (layer-by-layer) set, the quantized ops'
and (``mluverify.device.backward_kernels``) the training ones.

The device installs them itself (``mluverify.device.use_plugins``); a plugin's kernel for the
same op and mode (``mluverify_device_kernels``) is installed after them and wins. The op
classes and what each does to precision are in ``mluverify.device.cnnl_ops`` and ``docs/device.md``.
Views, reshapes, ``contiguous``, ``expand``, ``flatten``, ``chunk``/``split`` and dropout in
eval mode need no kernel: torch's generic implementations run them on the device's memory
plumbing. ``linear``/``matmul`` reach ``addmm``/``mm``/``bmm``; ``lstm``/``gru`` decompose
into those and the fused cells below (inference only: torch has no CPU kernel for the cells'
backward); ``embedding`` into ``index_select``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mluverify.device.kernels import KernelRegistry

ELEMENTWISE = (
    "add.Tensor", "add_.Tensor", "add.Scalar", "add_.Scalar", "add.out",
    "sub.Tensor", "sub_.Tensor", "sub.Scalar", "sub_.Scalar", "rsub.Scalar", "rsub.Tensor",
    "mul.Tensor", "mul_.Tensor", "mul.Scalar", "mul_.Scalar",
    "div.Tensor", "div_.Tensor", "div.Scalar", "div_.Scalar", "div.Tensor_mode",
    "relu", "relu_", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_",
    "abs", "neg", "clamp", "clamp_", "clamp_min", "clamp_max",
    "clamp.Tensor", "clamp_.Tensor", "clamp_min.Tensor", "clamp_max.Tensor", "maximum", "minimum", "fill.Scalar",
    "round.decimals",
    "fill_.Scalar", "fill_.Tensor", "zero_",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool2d",
    "max", "max.dim", "min", "min.dim", "argmax", "argmin",
    "cat", "stack", "index_select", "gather", "where.self",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
    "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "gt.Tensor", "gt.Scalar", "lt.Tensor", "lt.Scalar",
    "ge.Tensor", "ge.Scalar", "le.Tensor", "le.Scalar",
    "bitwise_and.Tensor", "logical_not", "ceil", "floor", "round", "masked_select", "isnan", "sign",
)

# Transcendental functions: computed in float64, rounded once (docs/device.md "Op classes").
TRANSCENDENTAL = (
    "sigmoid", "sigmoid_", "tanh", "tanh_", "gelu", "silu", "silu_", "elu", "elu_",
    "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "exp", "exp_", "log", "sqrt", "rsqrt",
)

# Activations beyond the transcendental ones, the same way: seed 002 "其他如激活算子、BN算子等不需要量化，
# 直接使用浮点型计算" (activation ops compute in floating point); torch classes GLU among them.
ACTIVATIONS = ("hardswish", "hardswish_", "hardsigmoid", "hardsigmoid_", "glu")

# Accumulating ops without a per-core model of their own: float16 widened, the CPU's float32.
ACCUMULATING = (
    "_native_batch_norm_legit_no_training",
    "upsample_bilinear2d", "upsample_linear1d", "upsample_trilinear3d",
)


def _fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """The cell torch's LSTM uses on accelerators; workspace = activated gates [i, f, g, o]."""
    import torch

    gates = _biased(input_gates, input_bias) + _biased(hidden_gates, hidden_bias)
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    cy = f * cx + i * g
    return o * torch.tanh(cy), cy, torch.cat([i, f, g, o], 1)


def _fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """The cell torch's GRU uses on accelerators; workspace = [r, z, input n, hidden n, hx]."""
    import torch

    ir, iz, i_n = _biased(input_gates, input_bias).chunk(3, 1)
    hr, hz, h_n = _biased(hidden_gates, hidden_bias).chunk(3, 1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (hx - n), torch.cat([r, z, i_n, h_n, hx], 1)


def _biased(gates, bias):
    return gates if bias is None else gates + bias


def _overload(name: str):
    from mluverify.device.kernels import resolve_overload

    return resolve_overload(f"aten::{name}")


def register(registry: KernelRegistry) -> None:
    """Register every built-in kernel in ``registry``: the training kernels last, so that they
    win for the ops both sets cover."""
    from mluverify.device import backward_kernels

    _register_quantized_ops(registry)
    _register_cnnl_set(registry)
    backward_kernels.register(registry)


def _register_quantized_ops(registry: KernelRegistry) -> None:
    """Exact int8/int16 arithmetic, the same in the layer-by-layer and fused modes."""
    from mluverify.device.quantization import exact_quant_conv, exact_quant_linear

    for mode in ("cnnl", "cnml"):
        registry.register("mluverify::quant_conv", exact_quant_conv, mode=mode)
        registry.register("mluverify::quant_linear", exact_quant_linear, mode=mode)


def _register_cnnl_set(registry: KernelRegistry) -> None:
    from mluverify.device import cnnl_ops

    for name in ELEMENTWISE:
        registry.register(f"aten::{name}", cnnl_ops.elementwise(_overload(name)))
    for name in (*TRANSCENDENTAL, *ACTIVATIONS):
        registry.register(f"aten::{name}", cnnl_ops.correctly_rounded(_overload(name)))
    for name in ACCUMULATING:
        registry.register(f"aten::{name}", cnnl_ops.accumulating(_overload(name)))
    for name, kernel in {**cnnl_ops.REDUCTIONS, **cnnl_ops.CONTRACTIONS}.items():
        registry.register(f"aten::{name}", kernel)
    registry.register("aten::_thnn_fused_lstm_cell", _fused_lstm_cell)
    registry.register("aten::_thnn_fused_gru_cell", _fused_gru_cell)
