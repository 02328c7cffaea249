"""The quantized layers as torch custom ops, so graphs (torch.export, torch.jit.trace) keep them.

``mluverify::quant_conv`` and ``mluverify::quant_linear`` compute in float on the CPU (a
quantized model is calibrated and checked there) and in exact integer arithmetic on the
emulated MLU (``exact_quant_conv`` / ``exact_quant_linear``, among the device's built-in
kernels: ``mluverify.device.builtin_kernels``). Fake kernels give torch.export shapes.

Quantization parameters are plain numbers, not tensors: a graph keeps them as constants, so
``traced.half()`` cannot round them to float16 (an int16 weight scale easily exceeds 65504).
``input_scale`` and ``weight_scales`` (one per output channel) are ``qmax / absmax``; ``qmax`` is
127 or 32767; ``mean``/``std`` (already times 255) normalise raw pixels of a ``firstconv`` layer.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from mluverify.device import _weight_cache
from mluverify.device.quantization._integer import (
    QuantizedWeight, dequantize, integer_conv, integer_linear, quantize)

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def normalise(x: torch.Tensor, mean: Optional[Sequence[float]], std: Optional[Sequence[float]]) -> torch.Tensor:
    """``(x - mean) / std`` per channel (dim 1) in ``x``'s dtype; unchanged without mean/std."""
    if mean is None or std is None:
        return x
    shape = (1, -1) + (1,) * (x.dim() - 2)
    return ((x - torch.tensor(mean, dtype=x.dtype, device=x.device).view(shape))
            / torch.tensor(std, dtype=x.dtype, device=x.device).view(shape))


def _float_conv(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
                mean: Optional[Sequence[float]], std: Optional[Sequence[float]]) -> torch.Tensor:
    conv = _CONV[weight.dim() - 2]
    return conv(normalise(input, mean, std), weight, bias, stride, padding, dilation, groups)


@torch.library.custom_op("mluverify::quant_conv", mutates_args=(), device_types="cpu")
def quant_conv(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
               stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
               input_scale: float, weight_scales: Sequence[float], qmax: int,
               mean: Optional[Sequence[float]], std: Optional[Sequence[float]]) -> torch.Tensor:
    """A quantized conv (1d/2d/3d by the weight's rank); on the CPU, the float conv."""
    return _float_conv(input, weight, bias, stride, padding, dilation, groups, mean, std)


@quant_conv.register_fake
def _quant_conv_fake(input, weight, bias, stride, padding, dilation, groups, input_scale,
                     weight_scales, qmax, mean, std):
    return _float_conv(input, weight, bias, stride, padding, dilation, groups, mean, std)


@torch.library.custom_op("mluverify::quant_linear", mutates_args=(), device_types="cpu")
def quant_linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 input_scale: float, weight_scales: Sequence[float], qmax: int) -> torch.Tensor:
    """A quantized linear layer; on the CPU, the float linear."""
    return F.linear(input, weight, bias)


@quant_linear.register_fake
def _quant_linear_fake(input, weight, bias, input_scale, weight_scales, qmax):
    return F.linear(input, weight, bias)


def exact_quant_conv(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                     stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                     groups: int, input_scale: float, weight_scales: Sequence[float], qmax: int,
                     mean: Optional[Sequence[float]], std: Optional[Sequence[float]]) -> torch.Tensor:
    """The device's quantized conv on CPU tensors: quantize, exact integer conv, dequantize."""
    x = normalise(input.to(torch.float32), mean, std)
    x_scale, w_scales = _scales(input_scale, weight_scales)
    qx = quantize(x, x_scale, qmax)
    qw = _quantized_weight(weight, weight_scales, w_scales, qmax)
    acc = integer_conv(qx, qw, stride, padding, dilation, groups)
    return dequantize(acc, x_scale, w_scales, bias, channel_dim=1).to(input.dtype)


def exact_quant_linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                       input_scale: float, weight_scales: Sequence[float], qmax: int) -> torch.Tensor:
    """The device's quantized linear on CPU tensors: quantize, exact integer matmul, dequantize."""
    x_scale, w_scales = _scales(input_scale, weight_scales)
    qx = quantize(input, x_scale, qmax)
    qw = _quantized_weight(weight, weight_scales, w_scales, qmax)
    acc = integer_linear(qx, qw)
    return dequantize(acc, x_scale, w_scales, bias, channel_dim=-1).to(input.dtype)


def _scales(input_scale: float, weight_scales: Sequence[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """Scales as float32 tensors: the precision they are calibrated and stored in."""
    return torch.tensor(input_scale, dtype=torch.float32), torch.tensor(weight_scales, dtype=torch.float32)


def _quantized_weight(weight: torch.Tensor, weight_scales: Sequence[float], w_scales: torch.Tensor,
                      qmax: int) -> QuantizedWeight:
    """The quantized weight, planned for any quantized input (|qx| <= qmax); cached per version."""
    def compute() -> QuantizedWeight:
        per_output_channel = w_scales.reshape((-1,) + (1,) * (weight.dim() - 1))
        return QuantizedWeight.of(quantize(weight, per_output_channel, qmax), x_bound=qmax)

    # the device's one weight cache: counted by memory_reserved(), freed by empty_cache()
    return _weight_cache.cached(weight, ("quantized", tuple(weight_scales), qmax), compute)
