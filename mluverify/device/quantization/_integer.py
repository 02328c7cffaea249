"""The exact integer arithmetic of quantized conv and linear, as pure functions on CPU tensors.

Quantized values are held in floating-point tensors with integer values, because torch's fast
conv / matmul kernels are floating point. That is exact as long as every partial sum is an
integer the format represents: float32 holds every integer up to 2**24, float64 up to 2**53.
Whatever order a kernel sums in, a partial sum is bounded by the sum of absolute products, so
the input channels are split into chunks whose bound stays within 2**24; each chunk runs in
float32 and the chunks are added in float64. When a single channel already exceeds 2**24
(int16 products reach 2**30), the whole contraction runs in float64. The bound uses the
largest possible quantized input (qmax), so the plan depends on the weight only and is cached.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

FLOAT32_EXACT = 2 ** 24
FLOAT64_EXACT = 2 ** 53
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

Contraction = Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor]
Chunks = tuple[tuple[int, int], ...]


def quantize(x: torch.Tensor, scale: torch.Tensor, qmax: int) -> torch.Tensor:
    """``clamp(round_half_even(x * scale), -qmax, qmax)`` computed in float32.

    ``scale`` broadcasts against ``x`` (a scalar, or one value per output channel).
    """
    product = x.to(torch.float32) * scale.to(torch.float32)
    return product.round_().clamp_(-qmax, qmax)


@dataclass(frozen=True)
class QuantizedWeight:
    """Integer-valued weights [out, in, *kernel] and how to contract them exactly.

    ``chunks`` are input-channel ranges whose float32 accumulation is exact for inputs of
    magnitude up to ``x_bound``; None when a single channel is already too large for float32.
    """

    values: torch.Tensor
    x_bound: float
    chunks: Chunks | None

    @classmethod
    def of(cls, values: torch.Tensor, x_bound: float) -> "QuantizedWeight":
        """Plan the exact contraction of ``values`` with inputs bounded by ``x_bound``."""
        weight_l1 = values.abs().flatten(2).sum(2) if values.dim() > 2 else values.abs()
        weight_l1 = weight_l1.to(torch.float64)
        weight_bound = float(weight_l1.sum(1).amax()) if weight_l1.numel() else 0.0
        if x_bound * weight_bound >= FLOAT64_EXACT:
            raise OverflowError("integer accumulation may exceed 2**53; cannot be computed exactly")
        if x_bound * weight_bound <= FLOAT32_EXACT:
            return cls(values.to(torch.float32), x_bound, ((0, values.shape[1]),))
        return cls(values.to(torch.float32), x_bound, float32_chunks(weight_l1, x_bound))


def integer_conv(qx: torch.Tensor, qw: QuantizedWeight, stride: Sequence[int], padding: Sequence[int],
                 dilation: Sequence[int], groups: int) -> torch.Tensor:
    """The exact integer convolution of integer-valued ``qx`` (|qx| <= qw.x_bound)."""
    conv = _CONV[qw.values.dim() - 2]

    def contract(x: torch.Tensor, w: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        if stop - start == w.shape[1]:
            return conv(x, w, None, stride, padding, dilation, groups)
        # Within every group, keep input channels start..stop of that group.
        x_part = x.unflatten(1, (groups, -1))[:, :, start:stop].flatten(1, 2)
        return conv(x_part, w[:, start:stop], None, stride, padding, dilation, groups)

    return _exact_contraction(qx, qw, contract)


def integer_linear(qx: torch.Tensor, qw: QuantizedWeight) -> torch.Tensor:
    """The exact integer product ``qx @ qw.T`` (|qx| <= qw.x_bound)."""

    def contract(x: torch.Tensor, w: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        return F.linear(x[..., start:stop], w[:, start:stop])

    return _exact_contraction(qx, qw, contract)


def _exact_contraction(qx: torch.Tensor, qw: QuantizedWeight, contract: Contraction) -> torch.Tensor:
    """Run ``contract`` over the planned float32 chunks, summed in float64 (or all in float64).

    The result holds the exact integers: float32 for a single chunk, float64 otherwise.
    """
    if qw.chunks is None:
        return contract(qx.to(torch.float64), qw.values.to(torch.float64), 0, qw.values.shape[1])
    x32 = qx.to(torch.float32)
    if len(qw.chunks) == 1:
        return contract(x32, qw.values, *qw.chunks[0])
    total = None
    for start, stop in qw.chunks:
        part = contract(x32, qw.values, start, stop).to(torch.float64)
        total = part if total is None else total.add_(part)
    return total


def float32_chunks(weight_l1: torch.Tensor, x_bound: float) -> Chunks | None:
    """Split input channels into contiguous ranges whose accumulation bound is <= 2**24.

    ``weight_l1[o, c]`` is the sum of |weight| of output ``o`` over input channel ``c``; the
    bound of a range is ``x_bound * max_o sum_c weight_l1[o, c]``. None when one channel alone
    exceeds the bound (float32 cannot be exact then).
    """
    channels = weight_l1.shape[1]
    if x_bound == 0 or channels == 0:
        return ((0, channels),)
    budget = torch.tensor([FLOAT32_EXACT / x_bound], dtype=torch.float64)
    prefix = F.pad(weight_l1.cumsum(1), (1, 0))
    chunks, start = [], 0
    while start < channels:
        # Bound of channels start..stop-1, for every stop; non-decreasing since weight_l1 >= 0.
        spans = (prefix[:, start + 1:] - prefix[:, start:start + 1]).amax(0)
        count = int(torch.searchsorted(spans, budget, right=True))
        if count == 0:
            return None
        chunks.append((start, start + count))
        start += count
    return tuple(chunks)


def dequantize(acc: torch.Tensor, input_scale: torch.Tensor, weight_scales: torch.Tensor,
               bias: torch.Tensor | None, channel_dim: int) -> torch.Tensor:
    """``acc / (s_x * s_w) + bias`` in float32, as the hardware's float epilogue does.

    ``s_x * s_w`` is formed in float64 and rounded once to float32; ``acc`` (exact integers)
    is rounded to float32; ``s_w`` and ``bias`` are per output channel.
    """
    shape = [1] * acc.dim()
    shape[channel_dim] = -1
    denominator = (input_scale.to(torch.float64) * weight_scales.to(torch.float64)).to(torch.float32)
    y = acc.to(torch.float32) / denominator.view(shape)
    if bias is not None:
        y.add_(bias.to(torch.float32).view(shape))
    return y
