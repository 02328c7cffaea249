"""The ops a MagicMind-like fused engine of the emulated MLU accepts: the device's fusible set.

Conv2d / linear / batched matmul (float and the quantization package's int8 / int16 ops),
batch-norm and layer-norm, the usual activations, pooling, attention
(``scaled_dot_product_attention``), embedding lookups, element-wise arithmetic and layout ops,
in float16 and float32: enough for CNNs and for transformer blocks (GPT-style decoders,
``nn.TransformerEncoderLayer``) to fuse whole. A plugin widens the set by returning more names
from ``mluverify_fusible_ops``; ``DEBUG_FORCED_FALLBACK_OPS`` narrows it.
"""
from __future__ import annotations

from mluverify.device import extensions

FUSIBLE_OPS: tuple[str, ...] = (
    # weight ops
    "aten::conv2d", "aten::convolution", "aten::linear", "aten::addmm", "aten::mm",
    "mluverify::quant_conv", "mluverify::quant_linear",
    # normalization and activations
    "aten::_native_batch_norm_legit_no_training", "aten::batch_norm", "aten::relu",
    "aten::hardtanh", "aten::sigmoid", "aten::tanh", "aten::gelu", "aten::silu",
    "aten::softmax.int", "aten::_softmax", "aten::layer_norm", "aten::native_layer_norm",
    # attention (one fused kernel, as the engine's multi-head attention) and embeddings
    # (``arange``: the position ids, a constant of the engine)
    "aten::scaled_dot_product_attention", "aten::bmm", "aten::baddbmm", "aten::embedding",
    "aten::arange", "aten::arange.start",
    # pooling
    "aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d",
    "aten::adaptive_avg_pool2d", "aten::mean.dim",
    # element-wise arithmetic
    "aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor",
    # layout
    "aten::transpose.int", "aten::permute", "aten::t", "aten::view", "aten::reshape",
    "aten::_unsafe_view", "aten::flatten.using_ints", "aten::cat", "aten::clone",
    "aten::unbind.int", "aten::split.Tensor", "aten::split_with_sizes", "aten::chunk",
    "aten::slice.Tensor", "aten::select.int", "aten::unsqueeze", "aten::squeeze.dim",
    "aten::expand", "aten::contiguous",
)


# Seed 001, "算子支持": "任何已经实现的算子都可以同时采用在线逐层、在线融合和离线模式的任何一种进行使用"
# (any implemented op can be used layer by layer, fused or offline): every op with a device
# kernel is fusible too, and so are the torch-level ops capture keeps whole that lower to them.
LOWERED_TO_KERNELS: tuple[str, ...] = (
    "aten::conv1d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::group_norm", "aten::max_pool1d", "aten::max_pool3d",
    "aten::avg_pool1d", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool3d",
    "aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::upsample_nearest1d.vec",
    "aten::upsample_nearest2d.vec", "aten::upsample_nearest3d.vec", "aten::upsample_bilinear2d.vec",
    "aten::upsample_linear1d.vec", "aten::upsample_trilinear3d.vec", "aten::matmul", "aten::log_softmax.int",
    "aten::conv1d.padding", "aten::conv2d.padding", "aten::conv3d.padding", "aten::conv_transpose2d.input",
    "aten::conv_transpose3d.input", "aten::std", "aten::std.dim", "aten::var", "aten::var.dim", "aten::relu6",
    "aten::true_divide.Tensor", "aten::max.other", "aten::min.other", "aten::zeros", "aten::lstm.input",
    "aten::gru.input",
    # layout ops the device runs through torch's generic implementations on its memory (no kernel)
    "aten::pad", "aten::constant_pad_nd", "aten::repeat", "aten::unfold",
)


def fusible_ops() -> tuple[str, ...]:
    """The engine's ops, every op with a device kernel, and the ops the plugins add."""
    return (FUSIBLE_OPS + LOWERED_TO_KERNELS + tuple(sorted(extensions.kernel_registry().op_names()))
            + extensions.plugin_fusible_ops())
