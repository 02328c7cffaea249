"""The convolution backward's two products, computed as the forward convolution is.

``InputGradient`` (grad_output x weight) and ``WeightGradient`` (input x grad_output) are
``contractions.Product``s computed by ``contractions.device_result`` as every product of the
matmul class: quantized operands on MLU270 (matmul precision int8 / int16 / int31), TF32
operands split across the cores on MLU370, the CPU's float32 product where the device multiplies
like the CPU (MLU270 ``float``, an operand holding Inf / NaN).
The reduced dimension is the output channels of a group for the input gradient and the batch
for the weight gradient; its core split is one backward convolution whose groups are the
(group, core) parts, as the forward's is one convolution. Used by
``mluverify.device.backward_kernels``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mluverify.device.contractions import (
    ConvolutionProduct, Product, ProductCall, combine_partials, device_result, padded_split)
from mluverify.device.numerics import active_cores, active_settings

_FLOATING = (torch.float16, torch.float32)
aten = torch.ops.aten


@dataclass(frozen=True)
class _ConvolutionGradient(ConvolutionProduct):
    """A product of the convolution's backward; the geometry is the forward convolution's. Its
    core split, as the forward's, is one call: each (group, core) part of the reduced dim is a
    group of one backward convolution with ``cores`` times the groups."""

    def backward(self, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                 mask: list[bool], groups: int | None = None) -> tuple:
        return aten.convolution_backward.default(grad_output, input, weight, None, self.stride, self.padding,
                                                 self.dilation, self.transposed, self.output_padding,
                                                 groups or self.groups, mask)


def _placeholder(like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor of ``shape`` whose values the product never reads: allocated, never filled (an
    expanded one-element tensor, as torch.nn.grad passes, is made contiguous by the CPU's oneDNN
    backward at every call: ~6% of an MLU370 training step; same kernel, same bits)."""
    return like.new_empty(shape)


def _times_cores(shape: tuple[int, ...], dim: int, cores: int) -> tuple[int, ...]:
    return shape[:dim] + (shape[dim] * cores,) + shape[dim + 1:]


@dataclass(frozen=True)
class InputGradient(_ConvolutionGradient):
    """grad_input = grad_output (left) x weight (right), summed over each group's output
    channels (dim 0 of a convolution's weight, dim 1 of a transposed one's)."""

    input_shape: tuple[int, ...] = ()

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.backward(left, _placeholder(left, self.input_shape), right, [True, False, False])[0]

    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        """The weight with one group per (group, core): its part of the group's output channels."""
        groups = self.groups
        if self.transposed:  # [(g, C_in/g), C_out/g, *k] -> [(g, core, C_in/g), part, *k]
            return padded_split(right.unflatten(0, (groups, -1)), 2, cores).transpose(1, 2).flatten(0, 2)
        # [(g, C_out/g), C_in/g, *k] -> [(g, core, part), C_in/g, *k]
        return padded_split(right.unflatten(0, (groups, -1)), 1, cores).flatten(0, 2)

    def grouped(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        groups = self.groups
        grad_output = padded_split(left.unflatten(1, (groups, -1)), 2, cores).flatten(1, 3)  # (g, core, part)
        input = _placeholder(left, _times_cores(self.input_shape, 1, cores))  # channels (g, core, C_in/g)
        return self.backward(grad_output, input, split_right, [True, False, False], groups * cores)[0]


def _batch_split(x: torch.Tensor, cores: int) -> torch.Tensor:
    """``x`` [N, C, *s] as [ceil(N / cores), (core, C), *s]: each core's images side by side
    as a channel group."""
    return padded_split(x, 0, cores).transpose(0, 1).flatten(1, 2)


# glibc maps a block of more than 32 MiB (its mmap threshold's ceiling on 64-bit) afresh at every
# allocation, and the first touch of each new page is a fault: ~1 ms per MiB in this VM, 35 ms for
# the 4 weight-gradient partials of a 512x512x3x3 convolution, ~0.4 s of ResNet-50's MLU370 step.
_FRESH_MAPPING_BYTES = 32 * 2**20
# Channels per oneDNN block (AVX-512, float32): a grouped convolution takes its fast kernel only
# for whole blocks per group, so a slice of whole blocks is computed by the same kernel.
_ONEDNN_BLOCK = 16


@dataclass(frozen=True)
class WeightGradient(_ConvolutionGradient):
    """grad_weight = input (left) x grad_output (right), summed over the batch (and positions)."""

    weight_shape: tuple[int, ...] = ()

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.backward(right, left, _placeholder(left, self.weight_shape), [False, True, False])[1]

    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        return _batch_split(right, cores)  # grad_output: channels (core, g, C_out/g)

    def partials(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        return self._partials(_batch_split(left, cores), split_right, cores, self.weight_shape)

    def _partials(self, input: torch.Tensor, grad_output: torch.Tensor, cores: int,
                  weight_shape: tuple[int, ...]) -> torch.Tensor:
        weight = _placeholder(input, _times_cores(weight_shape, 0, cores))  # dim 0 (core, g, c)
        grad_weight = self.backward(grad_output, input, weight, [False, True, False], self.groups * cores)[1]
        return grad_weight.unflatten(0, (cores, -1)).movedim(0, -1)

    def combined(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        """The partials combined pairwise; where they (``cores`` times the weight) would be
        mapped afresh, in slices of each group's output channels, one call per slice with the
        same groups: each element's partials are the same sums, so the same bits."""
        slice_channels = self._slice_channels(cores)
        if slice_channels is None:
            return combine_partials(self.partials(left, split_right, cores))
        groups = self.groups
        input = _batch_split(left, cores)
        grad_output = split_right.unflatten(1, (cores * groups, -1))  # [n, (core, g), C_out/g, *s]
        result = left.new_empty(self.weight_shape)
        by_group = result.unflatten(0, (groups, -1))
        for start in range(0, by_group.shape[1], slice_channels):
            channels = slice(start, start + slice_channels)
            shape = (groups * slice_channels,) + self.weight_shape[1:]
            part = self._partials(input, grad_output[:, :, channels].flatten(1, 2), cores, shape)
            by_group[:, channels] = combine_partials(part).unflatten(0, (groups, -1))
        return result

    def _slice_channels(self, cores: int) -> int | None:
        """Output channels per group in each slice (the fewest slices of whole oneDNN blocks that
        keep each call's partials below ``_FRESH_MAPPING_BYTES``), None for one call (always
        for a transposed convolution, whose output channels are the weight's dim 1)."""
        if self.transposed:
            return None
        partial_bytes = 4 * cores * math.prod(self.weight_shape)
        per_group = self.weight_shape[0] // self.groups
        slices = 1
        while partial_bytes // slices >= _FRESH_MAPPING_BYTES and per_group % (2 * slices * _ONEDNN_BLOCK) == 0:
            slices *= 2
        return per_group // slices if slices > 1 else None


def product_kernel(product: Product, left: torch.Tensor, right: torch.Tensor, cache_right: bool) -> torch.Tensor:
    """The product as the device computes it, in the dtype of ``left`` (float16 rounded once)."""
    dtype = left.dtype
    if dtype not in _FLOATING:
        return product(left, right)
    call = ProductCall(product, finish=_bare, cpu_op=product, weight=cache_right)
    return device_result(call, left, right, active_settings(), active_cores()).to(dtype)


def _bare(product: torch.Tensor) -> torch.Tensor:
    """A gradient has no bias: the product is the result."""
    return product
