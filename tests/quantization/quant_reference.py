"""An independent integer reference for quantized conv / linear, in numpy int64.

Written separately from mluverify's implementation (no torch conv, no float accumulation):
the conv is a loop over kernel offsets with int64 ``einsum`` over channels.
"""
from __future__ import annotations

import numpy as np


def quantize(x: np.ndarray, scale, qmax: int) -> np.ndarray:
    """Symmetric quantization in float32, round half to even, as int64."""
    product = x.astype(np.float32) * np.asarray(scale, dtype=np.float32)
    return np.clip(np.rint(product), -qmax, qmax).astype(np.int64)


def conv_int64(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int) -> np.ndarray:
    """N-d cross-correlation of int64 ``x`` [N, C, *S] with ``w`` [O, C/groups, *K], exactly."""
    spatial = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = w.shape[2:]
    out_size = [(x.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                for i in range(spatial)]
    in_per_group, out_per_group = x.shape[1] // groups, w.shape[0] // groups
    out = np.zeros((x.shape[0], w.shape[0], *out_size), dtype=np.int64)
    for offset in np.ndindex(*kernel):
        window = tuple(slice(offset[i] * dilation[i],
                             offset[i] * dilation[i] + stride[i] * (out_size[i] - 1) + 1, stride[i])
                       for i in range(spatial))
        patch = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            xs = patch[:, g * in_per_group:(g + 1) * in_per_group]
            ws = w[(slice(g * out_per_group, (g + 1) * out_per_group), slice(None)) + offset]
            out[:, g * out_per_group:(g + 1) * out_per_group] += np.einsum("nc...,oc->no...", xs, ws)
    return out


def dequantize(acc: np.ndarray, input_scale, weight_scales: np.ndarray, bias, channel_axis: int) -> np.ndarray:
    """``acc / (s_x * s_w) + bias`` in float32 (``s_x * s_w`` formed in float64, rounded once)."""
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    scales = np.float64(np.float32(input_scale)) * np.asarray(weight_scales, np.float32).astype(np.float64)
    y = acc.astype(np.float32) / scales.astype(np.float32).reshape(shape)
    if bias is not None:
        y = y + np.asarray(bias, np.float32).reshape(shape)
    return y


def quant_conv(x, w, bias, stride, padding, dilation, groups, input_scale, weight_scales, qmax,
               mean=None, std=None, out_dtype=np.float32) -> np.ndarray:
    """The output the device must produce for a quantized conv (mean/std already *255)."""
    x = np.asarray(x, np.float32)
    if mean is not None:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        x = (x - np.asarray(mean, np.float32).reshape(shape)) / np.asarray(std, np.float32).reshape(shape)
    qx = quantize(x, input_scale, qmax)
    w_scale_shape = (-1,) + (1,) * (w.ndim - 1)
    qw = quantize(w, np.asarray(weight_scales, np.float32).reshape(w_scale_shape), qmax)
    acc = conv_int64(qx, qw, stride, padding, dilation, groups)
    return dequantize(acc, input_scale, weight_scales, bias, channel_axis=1).astype(out_dtype)


def quant_linear(x, w, bias, input_scale, weight_scales, qmax, out_dtype=np.float32) -> np.ndarray:
    """The output the device must produce for a quantized linear layer."""
    qx = quantize(x, input_scale, qmax)
    qw = quantize(w, np.asarray(weight_scales, np.float32).reshape(-1, 1), qmax)
    acc = np.einsum("...k,ok->...o", qx, qw)
    return dequantize(acc, input_scale, weight_scales, bias, channel_axis=-1).astype(out_dtype)
