"""Adaptive quantized training: ``mlu_quantize.adaptive_quantize`` (seed 001, "模型量化").

``adaptive_quantize(model, steps_per_epoch, bitwidth=8)`` swaps the ``nn.Linear`` and
``nn.Conv1d/2d/3d`` layers (exact types) of a model for AdaptiveLinear / AdaptiveConv*. On
``mlu`` such a layer quantizes, per tensor and symmetrically (``scale = qmax / absmax``,
``qmax = 2**(bitwidth-1) - 1``), its input ``x`` and weight ``w`` in the forward and the gradient
``g`` of its output in the backward, and computes in exact integer arithmetic::

    y  = (qx * qw)   / (s_x s_w) + b        (* : the layer's convolution or matmul)
    dx = (qg *T qw)  / (s_g s_w)            (*T: the transposed contraction)
    dw = (qx *W qg)  / (s_x s_g)            (*W: the weight-gradient contraction)
    db = sum of g over all but the channel dimension (a float32 accumulation, not quantized)

``q = clamp(round_half_even(t * s), -qmax, qmax)`` computed in float32 (float64 for 31 bits).
On the CPU the layers compute in float (the float model), as the other quantized layers do.

Scale schedule (``ScaleSchedule``): a layer's *step* counts its forwards in training mode with
autograd on. Within each epoch (``position = step % steps_per_epoch``) the three scales are
re-estimated from the tensors themselves at positions 0, 1, 3, 7, ...: the interval starts at 1
and doubles after each re-estimation, up to ``max(1, steps_per_epoch // 8)``, then stays there.
A scale never estimated yet (0) is estimated on first use whatever the step. Why: ranges move
fastest at the start of training and right after an epoch boundary (where learning-rate
schedules step), and slowly in between, so frequent estimates are spent where they matter and
the cap keeps at least 8 per epoch so that drift within an epoch stays bounded; between
estimates a value outside the range saturates at ``qmax``. Each estimate costs one absmax
reduction of the tensor. State (step and scales) is in ``state_dict`` (buffers
``adaptive_step`` and ``adaptive_scales`` = [s_x, s_w, s_g]), so a checkpoint resumes the schedule.

Integer contractions are exact: in float32 when every partial sum is bounded by 2**24
(``qmax**2`` times the products summed), at once or in slices of the summed dimension (input
channels, output channels or the batch) added in float64; else in float64 (2**53); 31-bit values
are split into two 16-bit halves (Cambricon's INT31 is two int16 numbers) whose four contractions
are each exact in float64 and are combined in float64 (exact up to float64 rounding of the total).
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from mluverify.device.quantization._integer import FLOAT32_EXACT, FLOAT64_EXACT, dequantize
from mluverify.errors import InvalidArgument

BITWIDTHS: tuple[int, ...] = (8, 16, 31)
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_INPUT_GRAD = {1: torch.nn.grad.conv1d_input, 2: torch.nn.grad.conv2d_input, 3: torch.nn.grad.conv3d_input}
_CONV_WEIGHT_GRAD = {1: torch.nn.grad.conv1d_weight, 2: torch.nn.grad.conv2d_weight, 3: torch.nn.grad.conv3d_weight}
_HALF_BITS = 15  # 31-bit values = high * 2**15 + low, both within int16
_FLOAT32_MAX = torch.finfo(torch.float32).max


def qmax_of(bitwidth: int) -> int:
    """The largest quantized magnitude of a signed ``bitwidth``-bit integer: 127, 32767, 2**30-1."""
    return 2 ** (bitwidth - 1) - 1


# ---------------------------------------------------------------------------------------------
# the schedule
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleSchedule:
    """When scales are re-estimated (see the module docstring): a pure function of the step."""

    steps_per_epoch: int

    @property
    def max_interval(self) -> int:
        return max(1, self.steps_per_epoch // 8)

    @cached_property
    def positions(self) -> frozenset[int]:
        """Positions within an epoch at which the scales are re-estimated."""
        found, position, interval = [], 0, 1
        while position < self.steps_per_epoch:
            found.append(position)
            position += interval
            interval = min(2 * interval, self.max_interval)
        return frozenset(found)

    def updates_at(self, step: int) -> bool:
        return step % self.steps_per_epoch in self.positions


def scale_for(absmax: float, qmax: int) -> float:
    """``qmax / absmax``; a range too small for a float32 scale (or empty) gives 1.0."""
    return qmax / absmax if absmax > qmax / _FLOAT32_MAX else 1.0


def _absmax(t: torch.Tensor) -> float:
    return float(t.detach().abs().max()) if t.numel() else 0.0


# ---------------------------------------------------------------------------------------------
# exact integer arithmetic (CPU tensors; the device kernels)
# ---------------------------------------------------------------------------------------------


def quantize(t: torch.Tensor, scale: float, qmax: int) -> torch.Tensor:
    """``clamp(round_half_even(t * scale), -qmax, qmax)``: float32, float64 beyond 24 bits."""
    dtype = torch.float32 if qmax < FLOAT32_EXACT else torch.float64
    product = t.to(dtype) * torch.tensor(scale, dtype=torch.float32).to(dtype)
    return product.round_().clamp_(-qmax, qmax)


@dataclass(frozen=True)
class Summed:
    """The dimension a contraction sums over: ``length`` indices, each adding ``per_index``
    products to every result; ``axes``: where it lies in each operand, or None when it cannot be
    sliced there (the channels of a grouped convolution)."""

    length: int
    per_index: int
    axes: tuple[int, int] | None = None


def exact_contraction(contract: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], qa: torch.Tensor,
                      qb: torch.Tensor, qmax: int, summed: Summed) -> torch.Tensor:
    """``contract(qa, qb)`` of integer-valued tensors (|q| <= qmax), exactly, as float64.

    Every partial sum is bounded by ``qmax**2`` times the products summed: within 2**24 the
    contraction runs in float32 at once, or in float32 slices of the summed dimension added in
    float64; else in float64 (exact below 2**53); 31-bit values as two 16-bit halves.
    """
    per_index = qmax * qmax * summed.per_index
    if per_index * summed.length <= FLOAT32_EXACT:
        return contract(qa.to(torch.float32), qb.to(torch.float32)).to(torch.float64)
    if summed.axes is not None and per_index <= FLOAT32_EXACT:
        return _sliced(contract, qa, qb, summed, FLOAT32_EXACT // per_index)
    if per_index * summed.length < FLOAT64_EXACT:
        return contract(qa.to(torch.float64), qb.to(torch.float64))
    if 2 ** (2 * _HALF_BITS) * summed.per_index * summed.length >= FLOAT64_EXACT:
        raise OverflowError(f"a contraction of {summed.length * summed.per_index} products of 31-bit values "
                            "cannot be computed exactly")
    high_a, low_a = _halves(qa)
    high_b, low_b = _halves(qb)
    cross = contract(high_a, low_b) + contract(low_a, high_b)
    return contract(high_a, high_b) * 2.0 ** (2 * _HALF_BITS) + cross * 2.0 ** _HALF_BITS + contract(low_a, low_b)


def _sliced(contract, qa: torch.Tensor, qb: torch.Tensor, summed: Summed, step: int) -> torch.Tensor:
    """float32 contractions of ``step`` indices of the summed dimension at a time, in float64."""
    total = None
    for start in range(0, summed.length, step):
        size = min(step, summed.length - start)
        parts = [q.narrow(axis, start, size).to(torch.float32) for q, axis in zip((qa, qb), summed.axes)]
        part = contract(*parts).to(torch.float64)
        total = part if total is None else total.add_(part)
    return total


def _halves(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q = q.to(torch.float64)
    high = torch.floor(q / 2 ** _HALF_BITS)
    return high, q - high * 2 ** _HALF_BITS


def _dequantized(acc: torch.Tensor, scale_a: float, scale_b: float, bias: Optional[torch.Tensor],
                 channel_dim: int, dtype: torch.dtype) -> torch.Tensor:
    scales = [torch.tensor(s, dtype=torch.float32) for s in (scale_a, scale_b)]
    return dequantize(acc, scales[0], scales[1].reshape(1), bias, channel_dim).to(dtype)


def _channels(length: int, kernel: Sequence[int], groups: int, axes: tuple[int, int]) -> Summed:
    """Channels summed by a convolution: sliceable only without groups."""
    return Summed(length, math.prod(kernel), axes if groups == 1 else None)


def exact_adaptive_conv(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                        stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
                        input_scale: float, weight_scale: float, qmax: int) -> torch.Tensor:
    """The device's adaptive conv forward on CPU tensors."""
    conv = _CONV[weight.dim() - 2]
    acc = exact_contraction(lambda x, w: conv(x, w, None, stride, padding, dilation, groups),
                            quantize(input, input_scale, qmax), quantize(weight, weight_scale, qmax), qmax,
                            _channels(weight.shape[1], weight.shape[2:], groups, axes=(1, 1)))
    return _dequantized(acc, input_scale, weight_scale, bias, 1, input.dtype)


def exact_adaptive_conv_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                                 stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                                 groups: int, input_scale: float, weight_scale: float, grad_scale: float,
                                 qmax: int, input_grad: bool, weight_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The device's adaptive conv backward: (grad_input, grad_weight), empty where not asked."""
    n = weight.dim() - 2
    qg = quantize(grad_output, grad_scale, qmax)
    grad_input = grad_weight = input.new_empty(0)
    if input_grad:
        acc = exact_contraction(
            lambda g, w: _CONV_INPUT_GRAD[n](input.shape, w, g, stride, padding, dilation, groups),
            qg, quantize(weight, weight_scale, qmax), qmax,
            _channels(weight.shape[0] // groups, weight.shape[2:], groups, axes=(1, 0)))
        grad_input = _dequantized(acc, grad_scale, weight_scale, None, 1, input.dtype)
    if weight_grad:
        acc = exact_contraction(
            lambda x, g: _CONV_WEIGHT_GRAD[n](x, weight.shape, g, stride, padding, dilation, groups),
            quantize(input, input_scale, qmax), qg, qmax,
            Summed(grad_output.shape[0], math.prod(grad_output.shape[2:]), axes=(0, 0)))
        grad_weight = _dequantized(acc, input_scale, grad_scale, None, 0, weight.dtype)
    return grad_input, grad_weight


def exact_adaptive_linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                          input_scale: float, weight_scale: float, qmax: int) -> torch.Tensor:
    """The device's adaptive linear forward on CPU tensors."""
    acc = exact_contraction(F.linear, quantize(input, input_scale, qmax), quantize(weight, weight_scale, qmax),
                            qmax, Summed(weight.shape[1], 1, axes=(-1, 1)))
    return _dequantized(acc, input_scale, weight_scale, bias, -1, input.dtype)


def exact_adaptive_linear_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                                   input_scale: float, weight_scale: float, grad_scale: float, qmax: int,
                                   input_grad: bool, weight_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The device's adaptive linear backward: (grad_input, grad_weight), empty where not asked."""
    qg = quantize(grad_output, grad_scale, qmax)
    grad_input = grad_weight = input.new_empty(0)
    if input_grad:
        acc = exact_contraction(torch.matmul, qg, quantize(weight, weight_scale, qmax), qmax,
                                Summed(weight.shape[0], 1, axes=(-1, 0)))
        grad_input = _dequantized(acc, grad_scale, weight_scale, None, -1, input.dtype)
    if weight_grad:
        rows_g, rows_x = qg.reshape(-1, qg.shape[-1]), quantize(input, input_scale, qmax).reshape(-1, input.shape[-1])
        acc = exact_contraction(_weight_product, rows_g, rows_x, qmax, Summed(rows_g.shape[0], 1, axes=(0, 0)))
        grad_weight = _dequantized(acc, grad_scale, input_scale, None, 0, weight.dtype)
    return grad_input, grad_weight


def _weight_product(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``grad^T @ x`` over every leading dimension: the weight gradient of a linear layer."""
    return grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])


# ---------------------------------------------------------------------------------------------
# the custom ops: float on the CPU, exact integers on the device (mluverify.device.backward_kernels)
# ---------------------------------------------------------------------------------------------


@torch.library.custom_op("mluverify::adaptive_conv", mutates_args=(), device_types="cpu")
def adaptive_conv(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: Sequence[int],
                  padding: Sequence[int], dilation: Sequence[int], groups: int, input_scale: float,
                  weight_scale: float, qmax: int) -> torch.Tensor:
    """An adaptive quantized conv (1d/2d/3d by the weight's rank); on the CPU, the float conv."""
    return _CONV[weight.dim() - 2](input, weight, bias, stride, padding, dilation, groups)


@torch.library.custom_op("mluverify::adaptive_conv_backward", mutates_args=(), device_types="cpu")
def adaptive_conv_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                           stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
                           input_scale: float, weight_scale: float, grad_scale: float, qmax: int,
                           input_grad: bool, weight_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_input, grad_weight) of ``adaptive_conv``; on the CPU, the float gradients."""
    n = weight.dim() - 2
    grad_input = grad_weight = input.new_empty(0)
    if input_grad:
        grad_input = _CONV_INPUT_GRAD[n](input.shape, weight, grad_output, stride, padding, dilation, groups)
    if weight_grad:
        grad_weight = _CONV_WEIGHT_GRAD[n](input, weight.shape, grad_output, stride, padding, dilation, groups)
    return grad_input, grad_weight


@torch.library.custom_op("mluverify::adaptive_linear", mutates_args=(), device_types="cpu")
def adaptive_linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], input_scale: float,
                    weight_scale: float, qmax: int) -> torch.Tensor:
    """An adaptive quantized linear layer; on the CPU, the float linear."""
    return F.linear(input, weight, bias)


@torch.library.custom_op("mluverify::adaptive_linear_backward", mutates_args=(), device_types="cpu")
def adaptive_linear_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                             input_scale: float, weight_scale: float, grad_scale: float, qmax: int,
                             input_grad: bool, weight_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_input, grad_weight) of ``adaptive_linear``; on the CPU, the float gradients."""
    grad_input = grad_output.matmul(weight) if input_grad else input.new_empty(0)
    grad_weight = _weight_product(grad_output, input) if weight_grad else input.new_empty(0)
    return grad_input, grad_weight


# ---------------------------------------------------------------------------------------------
# the layers
# ---------------------------------------------------------------------------------------------

_INPUT, _WEIGHT, _GRAD = 0, 1, 2


class _AdaptiveFunction(torch.autograd.Function):
    """Forward and backward of one adaptive layer; the gradient scale is settled in backward."""

    @staticmethod
    def forward(ctx, input, weight, bias, layer, input_scale, weight_scale, estimate_grad_scale):
        ctx.layer, ctx.scales, ctx.estimate_grad_scale = layer, (input_scale, weight_scale), estimate_grad_scale
        ctx.save_for_backward(input, weight)
        return layer._quantized_forward(input, weight, bias, input_scale, weight_scale)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        layer = ctx.layer
        grad_scale = layer._grad_scale(grad_output, ctx.estimate_grad_scale)
        grad_input, grad_weight = layer._quantized_backward(grad_output, input, weight, *ctx.scales, grad_scale,
                                                            ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        grad_bias = grad_output.sum(layer._bias_reduction_dims(grad_output)) if ctx.needs_input_grad[2] else None
        return (grad_input if ctx.needs_input_grad[0] else None,
                grad_weight if ctx.needs_input_grad[1] else None, grad_bias, None, None, None, None)


class _AdaptiveLayer:
    """What AdaptiveLinear and AdaptiveConv* share: schedule, scales and the autograd function.

    Subclasses (also of the float class) give ``_quantized_forward``, ``_quantized_backward``
    and ``_bias_reduction_dims``.
    """

    def _adopt(self, module: nn.Module, schedule: ScaleSchedule, bitwidth: int) -> None:
        self.weight, self.bias = module.weight, module.bias
        self.schedule, self.bitwidth, self.qmax = schedule, bitwidth, qmax_of(bitwidth)
        device = self.weight.device
        self.register_buffer("adaptive_step", torch.zeros((), dtype=torch.int64, device=device))
        self.register_buffer("adaptive_scales", torch.zeros(3, dtype=torch.float32, device=device))

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, bitwidth={self.bitwidth}, "
                f"steps_per_epoch={self.schedule.steps_per_epoch}")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        training_step = self.training and torch.is_grad_enabled()
        update = training_step and self.schedule.updates_at(int(self.adaptive_step))
        scales = self.adaptive_scales.tolist()
        for which, tensor in ((_INPUT, input), (_WEIGHT, self.weight)):
            if update or scales[which] == 0:
                scales[which] = scale_for(_absmax(tensor), self.qmax)
        self._store_scales(scales)
        if training_step:
            self.adaptive_step.add_(1)
        estimate_grad_scale = update or scales[_GRAD] == 0
        return _AdaptiveFunction.apply(self._padded(input), self.weight, self.bias, self, scales[_INPUT],
                                       scales[_WEIGHT], estimate_grad_scale)

    def _padded(self, input: torch.Tensor) -> torch.Tensor:
        return input

    def _grad_scale(self, grad_output: torch.Tensor, estimate: bool) -> float:
        """The gradient's scale for this backward (re-estimated on an update step)."""
        scales = self.adaptive_scales.tolist()
        if estimate or scales[_GRAD] == 0:
            scales[_GRAD] = scale_for(_absmax(grad_output), self.qmax)
            self._store_scales(scales)
        return scales[_GRAD]

    def _store_scales(self, scales: list[float]) -> None:
        self.adaptive_scales.copy_(torch.tensor(scales, dtype=torch.float32))

    def _apply(self, fn, recurse=True):
        scales = self.adaptive_scales
        super()._apply(fn, recurse)
        # Scales stay float32 whatever .half() does (a 16-bit scale easily exceeds 65504).
        self.adaptive_scales = scales.to(self.adaptive_scales.device)
        return self


class AdaptiveLinear(_AdaptiveLayer, nn.Linear):
    """``nn.Linear`` trained with adaptive int8/int16/int31 quantization on the emulated MLU."""

    @classmethod
    def from_float(cls, module: nn.Linear, schedule: ScaleSchedule, bitwidth: int) -> "AdaptiveLinear":
        """The adaptive replacement of ``module`` (sharing its parameters)."""
        layer = cls(module.in_features, module.out_features, module.bias is not None, device="meta")
        layer._adopt(module, schedule, bitwidth)
        return layer

    def _quantized_forward(self, input, weight, bias, input_scale, weight_scale):
        return adaptive_linear(input, weight, bias, input_scale, weight_scale, self.qmax)

    def _quantized_backward(self, grad_output, input, weight, input_scale, weight_scale, grad_scale,
                            input_grad, weight_grad):
        return adaptive_linear_backward(grad_output, input, weight, input_scale, weight_scale, grad_scale,
                                        self.qmax, input_grad, weight_grad)

    def _bias_reduction_dims(self, grad_output: torch.Tensor) -> list[int]:
        return list(range(grad_output.dim() - 1))


class _AdaptiveConvNd(_AdaptiveLayer):
    """The conv part of AdaptiveConv1d/2d/3d; the conv attributes come from ``nn.ConvNd``."""

    @classmethod
    def from_float(cls, module: nn.Module, schedule: ScaleSchedule, bitwidth: int) -> "_AdaptiveConvNd":
        """The adaptive replacement of ``module`` (sharing its parameters)."""
        layer = cls(module.in_channels, module.out_channels, module.kernel_size, module.stride, module.padding,
                    module.dilation, module.groups, module.bias is not None, module.padding_mode, device="meta")
        layer._adopt(module, schedule, bitwidth)
        return layer

    def _padded(self, input: torch.Tensor) -> torch.Tensor:
        """Zero padding given as numbers goes to the conv; anything else is applied first."""
        if self._numeric_zero_padding:
            return input
        mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
        return F.pad(input, self._reversed_padding_repeated_twice, mode=mode)

    @property
    def _numeric_zero_padding(self) -> bool:
        return self.padding_mode == "zeros" and not isinstance(self.padding, str)

    @property
    def _conv_padding(self) -> list[int]:
        return list(self.padding) if self._numeric_zero_padding else [0] * len(self.kernel_size)

    def _quantized_forward(self, input, weight, bias, input_scale, weight_scale):
        return adaptive_conv(input, weight, bias, self.stride, self._conv_padding, self.dilation, self.groups,
                             input_scale, weight_scale, self.qmax)

    def _quantized_backward(self, grad_output, input, weight, input_scale, weight_scale, grad_scale,
                            input_grad, weight_grad):
        return adaptive_conv_backward(grad_output, input, weight, self.stride, self._conv_padding, self.dilation,
                                      self.groups, input_scale, weight_scale, grad_scale, self.qmax, input_grad,
                                      weight_grad)

    def _bias_reduction_dims(self, grad_output: torch.Tensor) -> list[int]:
        return [d for d in range(grad_output.dim()) if d != 1]


class AdaptiveConv1d(_AdaptiveConvNd, nn.Conv1d):
    """``nn.Conv1d`` trained with adaptive quantization on the emulated MLU."""


class AdaptiveConv2d(_AdaptiveConvNd, nn.Conv2d):
    """``nn.Conv2d`` trained with adaptive quantization on the emulated MLU."""


class AdaptiveConv3d(_AdaptiveConvNd, nn.Conv3d):
    """``nn.Conv3d`` trained with adaptive quantization on the emulated MLU."""


ADAPTIVE_MAPPING: dict[type, type] = {nn.Linear: AdaptiveLinear, nn.Conv1d: AdaptiveConv1d,
                                      nn.Conv2d: AdaptiveConv2d, nn.Conv3d: AdaptiveConv3d}


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------


def adaptive_quantize(model: nn.Module, steps_per_epoch: int, bitwidth: int = 8, inplace: bool = False) -> nn.Module:
    """``model`` with its ``nn.Linear`` / ``nn.Conv1d/2d/3d`` layers (exact types) trained in
    adaptive ``bitwidth``-bit quantized arithmetic on ``mlu`` (see the module docstring).

    :param steps_per_epoch: training steps per epoch (``len(train_loader)``), >= 1: the unit of
        the scale schedule.
    :param bitwidth: 8 (default), 16 or 31.
    :param inplace: modify ``model`` itself instead of a deep copy.

    A model without such layers is returned unchanged, with a warning.
    """
    if not isinstance(model, nn.Module):
        raise InvalidArgument(f"adaptive_quantize: 'model' must be a torch.nn.Module, got {model!r} "
                              f"(type={type(model).__name__})")
    if isinstance(steps_per_epoch, bool) or not isinstance(steps_per_epoch, int) or steps_per_epoch < 1:
        raise InvalidArgument(f"adaptive_quantize: 'steps_per_epoch' must be an integer >= 1 "
                              f"(len(train_data)); got {steps_per_epoch!r}")
    if isinstance(bitwidth, bool) or not isinstance(bitwidth, int) or bitwidth not in BITWIDTHS:
        raise InvalidArgument(f"adaptive_quantize: 'bitwidth' must be one of {', '.join(map(str, BITWIDTHS))}; "
                              f"got {bitwidth!r}")
    if not any(type(m) in ADAPTIVE_MAPPING for m in model.modules()):
        warnings.warn(f"adaptive_quantize: {type(model).__name__} has no nn.Linear or nn.Conv1d/2d/3d layer; "
                      "nothing is quantized", UserWarning, stacklevel=2)
        return model if inplace else copy.deepcopy(model)
    if not inplace:
        model = copy.deepcopy(model)
    return _swap(model, ScaleSchedule(steps_per_epoch), bitwidth)


def _swap(module: nn.Module, schedule: ScaleSchedule, bitwidth: int) -> nn.Module:
    adaptive_class = ADAPTIVE_MAPPING.get(type(module))
    if adaptive_class is not None:
        return adaptive_class.from_float(module, schedule, bitwidth)
    for name, child in module.named_children():
        setattr(module, name, _swap(child, schedule, bitwidth))
    return module
