"""Built-in plugin: the ops a MagicMind-like fused engine of the emulated MLU accepts.

Conv2d / linear (float and the quantization package's int8 / int16 ops), batch-norm, the usual
activations, pooling, element-wise arithmetic and layout ops, in float16 and float32. Another
plugin widens the set by returning more names; ``DEBUG_FORCED_FALLBACK_OPS`` narrows it.
"""
from __future__ import annotations

from typing import Iterable

from mluverify.hookspecs import hookimpl

FUSIBLE_OPS: tuple[str, ...] = (
    # weight ops
    "aten::conv2d", "aten::convolution", "aten::linear", "aten::addmm", "aten::mm",
    "mluverify::quant_conv", "mluverify::quant_linear",
    # normalization and activations
    "aten::_native_batch_norm_legit_no_training", "aten::batch_norm", "aten::relu",
    "aten::hardtanh", "aten::sigmoid", "aten::tanh", "aten::gelu", "aten::silu",
    "aten::softmax.int", "aten::_softmax",
    # pooling
    "aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d",
    "aten::adaptive_avg_pool2d", "aten::mean.dim",
    # element-wise arithmetic
    "aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor",
    # layout
    "aten::transpose.int", "aten::permute", "aten::t", "aten::view", "aten::reshape",
    "aten::_unsafe_view", "aten::flatten.using_ints", "aten::cat", "aten::clone",
)


@hookimpl
def mluverify_fusible_ops() -> Iterable[str]:
    return FUSIBLE_OPS
