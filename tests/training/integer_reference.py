"""An independent reference of adaptive quantized training: numpy, exact integers.

Values are quantized with numpy (``rint`` rounds half to even), then every contraction runs on
numpy integers: int64 for 8 and 16 bits, Python integers (object arrays) for 31 bits, whose
products overflow int64. Convolutions are written out window by window with ``tensordot``; no
torch op computes anything here.
"""
from __future__ import annotations

import numpy as np

FLOAT32_EXACT = 2 ** 24


def quantize(x: np.ndarray, scale: float, qmax: int) -> np.ndarray:
    """``clamp(rint(x * scale), -qmax, qmax)``, the product in float32 (float64 beyond 24 bits)."""
    dtype = np.float32 if qmax < FLOAT32_EXACT else np.float64
    q = np.clip(np.rint(x.astype(dtype) * dtype(np.float32(scale))), -qmax, qmax).astype(np.int64)
    return q if qmax < FLOAT32_EXACT else q.astype(object)


def dequantize(acc: np.ndarray, scale_a: float, scale_b: float, bias: np.ndarray | None = None,
               channel_axis: int = 1) -> np.ndarray:
    """``float32(acc) / float32(s_a * s_b) [+ bias]`` (the scales' product formed in float64)."""
    y = acc.astype(np.float64).astype(np.float32) / np.float32(np.float64(np.float32(scale_a)) * np.float32(scale_b))
    if bias is not None:
        shape = [1] * y.ndim
        shape[channel_axis] = -1
        y = y + bias.astype(np.float32).reshape(shape)
    return y


def _window(xp: np.ndarray, i: int, j: int, out_hw: tuple[int, int], stride: int, dilation: int) -> np.ndarray:
    """The input positions multiplied by kernel tap (i, j), for every output position."""
    oh, ow = out_hw
    return xp[:, :, i * dilation: i * dilation + stride * (oh - 1) + 1: stride,
              j * dilation: j * dilation + stride * (ow - 1) + 1: stride]


def _geometry(x_shape, w_shape, stride, padding, dilation):
    _, _, h, w = x_shape
    _, _, kh, kw = w_shape
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    return (oh, ow), kh, kw


def conv2d(x, w, stride: int, padding: int, dilation: int, groups: int) -> np.ndarray:
    """Integer conv2d (square stride / padding / dilation), groups included."""
    (oh, ow), kh, kw = _geometry(x.shape, w.shape, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), dtype=x.dtype)
    cg, og = w.shape[1], w.shape[0] // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = _window(xp[:, g * cg:(g + 1) * cg], i, j, (oh, ow), stride, dilation)
                taps = w[g * og:(g + 1) * og, :, i, j]
                out[:, g * og:(g + 1) * og] += np.tensordot(patch, taps, axes=([1], [1])).transpose(0, 3, 1, 2)
    return out


def conv2d_input_grad(grad, w, x_shape, stride: int, padding: int, dilation: int, groups: int) -> np.ndarray:
    """Integer gradient of conv2d with respect to its input: each output's gradient times each
    tap, added back at the input position that tap read."""
    (oh, ow), kh, kw = _geometry(x_shape, w.shape, stride, padding, dilation)
    n, c, h, wd = x_shape
    gp = np.zeros((n, c, h + 2 * padding, wd + 2 * padding), dtype=grad.dtype)
    cg, og = w.shape[1], w.shape[0] // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                taps = w[g * og:(g + 1) * og, :, i, j]
                part = np.tensordot(grad[:, g * og:(g + 1) * og], taps, axes=([1], [0])).transpose(0, 3, 1, 2)
                _window(gp[:, g * cg:(g + 1) * cg], i, j, (oh, ow), stride, dilation)[...] += part
    return gp[:, :, padding: padding + h, padding: padding + wd]


def conv2d_weight_grad(x, grad, w_shape, stride: int, padding: int, dilation: int, groups: int) -> np.ndarray:
    """Integer gradient of conv2d with respect to its weight: per tap, outputs' gradients times
    the inputs that tap read, summed over batch and positions."""
    (oh, ow), kh, kw = _geometry(x.shape, w_shape, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out = np.zeros(w_shape, dtype=x.dtype)
    cg, og = w_shape[1], w_shape[0] // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = _window(xp[:, g * cg:(g + 1) * cg], i, j, (oh, ow), stride, dilation)
                out[g * og:(g + 1) * og, :, i, j] = np.tensordot(grad[:, g * og:(g + 1) * og], patch,
                                                                 axes=([0, 2, 3], [0, 2, 3]))
    return out
