"""An independent numpy model of the emulated MLU's numerics (docs/device.md, "Numerics").

Written from the documented rules, not from mluverify's code: nothing here imports mluverify
or torch. Integer products are exact (numpy int64, split into 15-bit halves where int64 could
overflow); the per-core sums follow the split rule (parts of ceil(E / cores) elements, each
accumulated in float32 in 64 lanes, element by element, lanes and partials added pairwise in
float32); pooling windows are
walked one output position at a time.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

F32 = np.float32
F64 = np.float64
QMAX = {"int8": 127, "int16": 32767, "int31": 2**30 - 1}
_TINY_RANGE = 32767 / float(np.finfo(np.float32).max)
U32 = 2.0 ** -24  # unit roundoff of float32
U64 = 2.0 ** -53


# --- quantization and exact integer products ---------------------------------------------------


def scale_of(x: np.ndarray, qmax: int) -> F32:
    """``qmax / absmax`` in float64, held as float32; 1.0 for an all-zero range."""
    absmax = float(np.max(np.abs(x))) if x.size else 0.0
    return F32(qmax / absmax) if absmax > _TINY_RANGE else F32(1.0)


def quantize(x: np.ndarray, qmax: int) -> tuple[np.ndarray, F32]:
    """Integer values (int64) and scale: ``rint(x * scale)``, the product in float32 (float64
    for int31)."""
    scale = scale_of(x, qmax)
    if qmax < 2**24:
        product = x.astype(F32) * scale
    else:
        product = x.astype(F64) * F64(scale)
    return np.rint(product).astype(np.int64), scale


def exactly(contract, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``contract(a, b)`` in exact integers (an object array of Python ints when int64 could
    overflow: ``b`` split into 15-bit halves, each half's product exact in int64)."""
    if a.size == 0 or b.size == 0 or int(np.abs(a).max()) * int(np.abs(b).max()) * max(a.size, b.size) < 2**62:
        return contract(a, b)
    high, low = np.floor_divide(b, 2**15), np.mod(b, 2**15)
    return contract(a, high).astype(object) * 2**15 + contract(a, low).astype(object)


def conv_int64(x, w, stride, padding, dilation, groups):
    """N-d cross-correlation of int64 ``x`` [N, C, *S] with ``w`` [O, C/g, *K]."""
    nd = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = w.shape[2:]
    out = [(x.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    result = np.zeros((x.shape[0], w.shape[0], *out), dtype=np.int64)
    for offset in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(offset[i] * dilation[i], offset[i] * dilation[i] + stride[i] * (out[i] - 1) + 1,
                             stride[i]) for i in range(nd))
        patch = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            weights = w[(slice(g * cout, (g + 1) * cout), slice(None)) + offset]
            result[:, g * cout:(g + 1) * cout] += np.einsum("nc...,oc->no...", patch[:, g * cin:(g + 1) * cin],
                                                            weights)
    return result


def conv_transpose_int64(x, w, stride, padding, output_padding, dilation, groups):
    """Transposed convolution of int64 ``x`` [N, C, *S] with ``w`` [C, O/g, *K]: every input
    element scatters ``x * w`` to ``i * stride - padding + k * dilation``."""
    nd = w.ndim - 2
    kernel = w.shape[2:]
    size = [(x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1)
            + output_padding[i] + 1 for i in range(nd)]
    cin, cout = x.shape[1] // groups, w.shape[1]
    full = [s + 2 * p + dilation[i] * kernel[i] for i, (s, p) in enumerate(zip(size, padding))]
    result = np.zeros((x.shape[0], cout * groups, *full), dtype=np.int64)
    for offset in itertools.product(*(range(k) for k in kernel)):
        target = tuple(slice(offset[i] * dilation[i], offset[i] * dilation[i] + stride[i] * (x.shape[2 + i] - 1) + 1,
                             stride[i]) for i in range(nd))
        for g in range(groups):
            weights = w[(slice(g * cin, (g + 1) * cin), slice(None)) + offset]
            result[(slice(None), slice(g * cout, (g + 1) * cout)) + target] += np.einsum(
                "nc...,co->no...", x[:, g * cin:(g + 1) * cin], weights)
    crop = tuple(slice(p, p + s) for p, s in zip(padding, size))
    return result[(slice(None), slice(None)) + crop]


def dequantize(acc: np.ndarray, left_scale: F32, right_scale: F32) -> np.ndarray:
    """``fl32(acc) / fl32(s_left * s_right)`` (float32)."""
    denominator = F32(F64(left_scale) * F64(right_scale))
    as_float = np.vectorize(lambda v: F32(float(v)), otypes=[F32])(acc) if acc.dtype == object else acc.astype(F32)
    return as_float / denominator


def accumulation_bound(abs_products_sum: np.ndarray, terms: int, unit: float) -> np.ndarray:
    """Any order of summing ``terms`` rounded products is within ``gamma * sum |p|`` of the exact
    sum, ``gamma = n u / (1 - n u)`` with ``n = terms + 1`` (Higham, Accuracy and Stability of
    Numerical Algorithms, 3.1)."""
    n = terms + 1
    return abs_products_sum.astype(F64) * (n * unit / (1 - n * unit))


# --- per-core sums -------------------------------------------------------------------------------


LANES = 64


def pairwise(terms: list) -> np.ndarray:
    """float32 ``terms`` (a power-of-two count) added neighbours first: ((t0+t1)+(t2+t3))..."""
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] for i in range(0, len(terms), 2)]
    return terms[0]


def lane_sum(part: np.ndarray) -> np.ndarray:
    """A core's float32 sum of ``part`` (last axis): element j into lane j mod 64, each lane
    summed in order, the 64 lane sums added pairwise."""
    lanes = [None] * LANES
    for j in range(part.shape[-1]):
        lane = lanes[j % LANES]
        lanes[j % LANES] = part[..., j] if lane is None else lane + part[..., j]
    return pairwise([np.zeros(part.shape[:-1], F32) if lane is None else lane for lane in lanes])


def core_partials_sum(values: np.ndarray, cores: int) -> np.ndarray:
    """Per-core sum over the last axis of float32 ``values``: contiguous parts of
    ceil(E / cores) elements, each summed by ``lane_sum``, the partials added pairwise."""
    values = values.astype(F32)
    extent = values.shape[-1]
    size = -(-extent // cores) if extent else 0
    return pairwise([lane_sum(values[..., p * size:(p + 1) * size]) for p in range(cores)])


def core_sum(x: np.ndarray, axes, cores: int, keepdims: bool = False) -> np.ndarray:
    axes = tuple(a % x.ndim for a in axes) if axes else tuple(range(x.ndim))
    moved = np.moveaxis(x, axes, range(-len(axes), 0))
    flat = moved.reshape(*moved.shape[:x.ndim - len(axes)], -1)
    total = core_partials_sum(flat, cores)
    if keepdims:
        total = total.reshape([1 if d in axes else n for d, n in enumerate(x.shape)])
    return total


def extent_of(x: np.ndarray, axes) -> int:
    axes = axes or tuple(range(x.ndim))
    return math.prod(x.shape[a] for a in axes)


def core_mean(x, axes, cores, keepdims=False):
    return core_sum(x, axes, cores, keepdims) / F32(extent_of(x, axes))


def core_var(x, axes, cores, correction, keepdims=False):
    deviation = x - core_mean(x, axes, cores, keepdims=True)
    squares = core_sum(deviation * deviation, axes, cores, keepdims)
    return squares / F32(max(extent_of(x, axes) - correction, 0))


def softmax(x, axis, cores, log=False):
    shifted = x - x.max(axis=axis, keepdims=True)
    exponentials = np.exp(shifted.astype(F64)).astype(F32)
    total = core_sum(exponentials, (axis,), cores, keepdims=True)
    if log:
        return shifted - np.log(total.astype(F64)).astype(F32)
    return exponentials / total


def normalized(x, axes, eps, cores):
    """``((x - mean) * rstd, mean, var, rstd)`` keepdims, rstd = 1 / sqrt(var + eps)."""
    mean = core_mean(x, axes, cores, keepdims=True)
    deviation = x - mean
    variance = core_sum(deviation * deviation, axes, cores, keepdims=True) / F32(extent_of(x, axes))
    rstd = F32(1) / np.sqrt(variance + F32(eps))
    return deviation * rstd, mean, variance, rstd


def avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, cores):
    """Average pooling over the last len(kernel) axes, one window at a time."""
    nd = len(kernel)
    lengths = x.shape[-nd:]
    outs = []
    for n, k, s, p in zip(lengths, kernel, stride, padding):
        span = n + 2 * p - k
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        outs.append(o)
    lead = x.shape[:-nd]
    result = np.zeros((*lead, *outs), dtype=F32)
    for position in itertools.product(*(range(o) for o in outs)):
        starts = [o * s - p for o, s, p in zip(position, stride, padding)]
        window = []
        for offset in itertools.product(*(range(k) for k in kernel)):
            index = [a + b for a, b in zip(starts, offset)]
            inside = all(0 <= i < n for i, n in zip(index, lengths))
            window.append(x[(..., *index)] if inside else np.zeros(lead, F32))
        total = core_partials_sum(np.stack(window, -1).astype(F32), cores)
        if divisor_override:
            divisor = divisor_override
        else:
            divisor = 1
            for start, k, n, p in zip(starts, kernel, lengths, padding):
                end = min(start + k, n + p)
                divisor *= (end - start) if count_include_pad else (min(end, n) - max(start, 0))
        result[(..., *position)] = total / F32(divisor)
    return result


def adaptive_avg_pool(x, output_size, cores):
    """Adaptive average pooling: window o of a length-L axis is [floor(oL/O), ceil((o+1)L/O))."""
    nd = len(output_size)
    lengths = x.shape[-nd:]
    result = np.zeros((*x.shape[:-nd], *output_size), dtype=F32)
    for position in itertools.product(*(range(o) for o in output_size)):
        ranges = [range(o * n // big, -(-(o + 1) * n // big)) for o, n, big in zip(position, lengths, output_size)]
        window = [x[(..., *index)] for index in itertools.product(*ranges)]
        total = core_partials_sum(np.stack(window, -1).astype(F32), cores)
        result[(..., *position)] = total / F32(len(window))
    return result
