"""The convolution backward's two products, computed as the forward convolution is.

``InputGradient`` (grad_output x weight) and ``WeightGradient`` (input x grad_output) are
``contractions.Product``s computed by ``contractions.device_result`` as every product of the
matmul class: quantized operands on MLU270 (matmul precision int8 / int16 / int31), TF32
operands split across the cores on MLU370, the CPU's float32 product where the device multiplies
like the CPU (MLU270 ``float``, an operand holding Inf / NaN).
The reduced dimension is the output channels of a group for the input gradient and the batch
for the weight gradient. Used by ``mluverify.plugins.mlu_backward_kernels``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from mluverify.device.contractions import ConvolutionProduct, Product, ProductCall, device_result
from mluverify.device.numerics import active_cores, active_settings

_FLOATING = (torch.float16, torch.float32)
aten = torch.ops.aten


@dataclass(frozen=True)
class _ConvolutionGradient(ConvolutionProduct):
    """A product of the convolution's backward; the geometry is the forward convolution's."""

    def backward(self, grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                 mask: list[bool]) -> tuple:
        return aten.convolution_backward.default(grad_output, input, weight, None, self.stride, self.padding,
                                                 self.dilation, self.transposed, self.output_padding,
                                                 self.groups, mask)


    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        return right  # a gradient's operands change every step: nothing to prepare

    def partials(self, left: torch.Tensor, right: torch.Tensor, cores: int) -> torch.Tensor:
        """One product per contiguous part of ``ceil(E / cores)`` of the reduced dim (empty
        parts add +0), stacked in a last dim of size ``cores``."""
        extent = self.extent(left, right)
        size = max(1, -(-extent // cores))
        parts = [self.part(left, right, start, min(start + size, extent)) for start in range(0, extent, size)]
        parts += [torch.zeros_like(parts[0])] * (cores - len(parts))
        return torch.stack(parts, -1)

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        """The size of the reduced dim."""
        raise NotImplementedError

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """The product over ``start:stop`` of the reduced dim."""
        raise NotImplementedError


def _placeholder(like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor of ``shape`` whose values the product never reads (as torch.nn.grad does)."""
    return like.new_empty(1).expand(shape)


@dataclass(frozen=True)
class InputGradient(_ConvolutionGradient):
    """grad_input = grad_output (left) x weight (right), summed over each group's output
    channels (dim 0 of a convolution's weight, dim 1 of a transposed one's)."""

    input_shape: tuple[int, ...] = ()

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.backward(left, _placeholder(left, self.input_shape), right, [True, False, False])[0]

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        return left.shape[1] // self.groups

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        left = left.unflatten(1, (self.groups, -1))[:, :, start:stop].flatten(1, 2)
        if self.transposed:
            right = right[:, start:stop]
        else:
            right = right.unflatten(0, (self.groups, -1))[:, start:stop].flatten(0, 1)
        return self(left, right)


@dataclass(frozen=True)
class WeightGradient(_ConvolutionGradient):
    """grad_weight = input (left) x grad_output (right), summed over the batch (and positions)."""

    weight_shape: tuple[int, ...] = ()

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.backward(right, left, _placeholder(left, self.weight_shape), [False, True, False])[1]

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        return left.shape[0]

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        return self(left[start:stop], right[start:stop])


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
