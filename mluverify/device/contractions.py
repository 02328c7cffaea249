"""The matmul class on the emulated MLU: convolution (every kind), mm, addmm and bmm, as pure
functions on CPU tensors (the kernels of ``mluverify.plugins.mlu_cnnl_kernels``).

How a product ``left x right`` (``right`` the weight) is computed, by the active settings
(``mluverify.device.numerics``); float16 inputs are widened exactly to float32 first and the
result is rounded to float16 once, at the end:

* **MLU270, quantized** (matmul precision int8 / int16 / int31, int16 by default): each
  operand is quantized symmetrically per tensor (``numerics.quantize``: scale
  ``qmax / absmax``, round half to even); the integer values are multiplied and accumulated
  (in float32 for int8 / int16, which is exact while every partial sum stays below 2**24 in
  magnitude and rounds beyond; in float64 for int31); the accumulator is rounded to float32
  and divided by ``fl32(scale_left * scale_right)``; the bias is added in float32. The
  model's partials are exact integers, so the core split of the reduced dimension changes
  nothing and is not computed. An operand holding Inf or NaN has no scale: that call
  computes as the ``float`` setting does.
* **MLU270, float**: the CPU's float32 arithmetic on the (widened) inputs, bias included.
* **MLU370**: float32 inputs rounded to TF32 (10 mantissa bits); the reduced dimension (input
  channels per group of a convolution, K of a matrix product) is split across the cores as
  every reduction is (``mluverify.device.reductions``): each part is one float32 product by the
  CPU's kernel, the partials are combined pairwise in float32, then the bias is added.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from mluverify.device import _weight_cache
from mluverify.device.numerics import (
    NumericsSettings, Quantized, active_cores, active_settings, quantize, round_mantissa)
from mluverify.device.reductions import combine_pairwise, split_bounds

_F16, _F32 = torch.float16, torch.float32
_FLOATING = (_F16, _F32)
aten = torch.ops.aten


class Product:
    """A bilinear product of two operands; ``part`` computes it over a range of the reduced dim."""

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        raise NotImplementedError

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        raise NotImplementedError


@dataclass(frozen=True)
class MatrixProduct(Product):
    """``left [..., M, K] @ right [..., K, N]`` (mm, bmm)."""

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return torch.matmul(left, right)

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        return left.shape[-1]

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        return torch.matmul(left[..., start:stop], right[..., start:stop, :])


@dataclass(frozen=True)
class ConvolutionProduct(Product):
    """``aten.convolution`` without bias; the reduced dim is the input channels of a group."""

    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return aten.convolution.default(left, right, None, self.stride, self.padding, self.dilation,
                                        self.transposed, self.output_padding, self.groups)

    def extent(self, left: torch.Tensor, right: torch.Tensor) -> int:
        return left.shape[1] // self.groups

    def part(self, left: torch.Tensor, right: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        groups = self.groups
        left = left.unflatten(1, (groups, -1))[:, :, start:stop].flatten(1, 2)
        # The weight's input channels: dim 0 of a transposed convolution's weight, else dim 1.
        if self.transposed:
            right = right.unflatten(0, (groups, -1))[:, start:stop].flatten(0, 1)
        else:
            right = right[:, start:stop]
        return self(left, right)


def split_product(product: Product, left: torch.Tensor, right: torch.Tensor, cores: int) -> torch.Tensor:
    """The product with its reduced dim split across ``cores``: one float32 product per
    non-empty part, partials combined pairwise (empty parts add +0)."""
    if cores == 1:
        return product(left, right)
    bounds = [(a, b) for a, b in split_bounds(product.extent(left, right), cores) if b > a]
    if len(bounds) <= 1:
        return product(left, right)
    partials = [product.part(left, right, a, b) for a, b in bounds]
    partials += [torch.zeros_like(partials[0])] * (cores - len(partials))
    return combine_pairwise(torch.stack(partials, -1))


def dequantize(accumulator: torch.Tensor, left_scale: float, right_scale: float) -> torch.Tensor:
    """``fl32(acc) / fl32(left_scale * right_scale)`` (the product of the scales is exact in
    float64 and rounded once)."""
    denominator = float(np.float32(left_scale * right_scale))
    return accumulator.to(_F32).div_(denominator)  # the accumulator is a fresh tensor: in place


def quantized_product(product: Product, left: Quantized, right: Quantized) -> torch.Tensor:
    """The dequantized float32 product of two quantized operands (accumulated in their
    values' dtype: float32 for int8 / int16, float64 for int31)."""
    return dequantize(product(left.values, right.values), left.scale, right.scale)


def _prepared(x: torch.Tensor, recipe: tuple, prepare: Callable[[], object], cache: bool) -> object:
    return _weight_cache.cached(x, recipe, prepare) if cache else prepare()


def device_product(product: Product, left: torch.Tensor, right: torch.Tensor, cache_right: bool,
                   settings: NumericsSettings, cores: int) -> torch.Tensor | None:
    """The float32 product as the device computes it (no bias), or None where the device
    multiplies like the CPU (MLU270 ``float``, or an operand that cannot be quantized)."""
    qmax = settings.qmax
    if qmax is not None:
        quantized_left = quantize(left, qmax)
        quantized_right = _prepared(right, ("quantized", qmax), lambda: quantize(right, qmax), cache_right)
        if quantized_left is None or quantized_right is None:
            return None
        return quantized_product(product, quantized_left, quantized_right)
    bits = settings.profile.matmul_float32_mantissa_bits
    if bits is None:
        return None
    if left.dtype == _F32 and right.dtype == _F32:  # float16 values are exact in TF32 already
        left = round_mantissa(left, bits)
        right = _prepared(right, ("mantissa", bits), lambda: round_mantissa(right, bits), cache_right)
    return split_product(product, _widened(left), _widened(right), cores)


def _widened(x: torch.Tensor) -> torch.Tensor:
    return x.to(_F32) if x.dtype == _F16 else x


def _run(product: Product, left: torch.Tensor, right: torch.Tensor, cache_right: bool,
         finish: Callable[[torch.Tensor], torch.Tensor], cpu_op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
         ) -> torch.Tensor:
    """``finish(device product)``, or ``cpu_op`` on the widened inputs where the device
    multiplies like the CPU; rounded to float16 at the end when the input was float16."""
    dtype = left.dtype
    if dtype not in _FLOATING:
        return cpu_op(left, right)
    y = device_product(product, left, right, cache_right, active_settings(), active_cores())
    result = cpu_op(_widened(left), _widened(right)) if y is None else finish(y)
    return result.to(dtype) if result.dtype != dtype else result


def _channel_shape(output: torch.Tensor) -> list[int]:
    return [1, -1] + [1] * (output.dim() - 2)


def convolution(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                output_padding: Sequence[int], groups: int) -> torch.Tensor:
    """``aten.convolution_overrideable`` (every convolution: 1d/2d/3d, grouped, dilated,
    transposed) as the device computes it."""
    product = ConvolutionProduct(tuple(stride), tuple(padding), tuple(dilation), bool(transposed),
                                 tuple(output_padding), groups)

    def finish(y: torch.Tensor) -> torch.Tensor:
        return y if bias is None else y.add_(_widened(bias).reshape(_channel_shape(y)))

    def cpu_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return aten.convolution.default(x, w, None if bias is None else _widened(bias), stride, padding,
                                        dilation, transposed, output_padding, groups)

    return _run(product, input, weight, True, finish, cpu_op)


def mm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``aten.mm`` as the device computes it (``right`` prepared once per version: a weight)."""
    return _run(MatrixProduct(), left, right, True, lambda y: y, aten.mm.default)


def bmm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``aten.bmm`` as the device computes it."""
    return _run(MatrixProduct(), left, right, False, lambda y: y, aten.bmm.default)


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1,
          alpha: float = 1) -> torch.Tensor:
    """``aten.addmm``: ``alpha * (mat1 @ mat2)`` (the device's product) ``+ beta * input``, in
    float32 (``input`` ignored when beta is 0, as BLAS does)."""

    def finish(y: torch.Tensor) -> torch.Tensor:  # y is a fresh product: updated in place
        if alpha != 1:
            y.mul_(alpha)
        if beta == 0:
            return y
        added = _widened(input)
        return y.add_(added if beta == 1 else added * beta)

    def cpu_op(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return aten.addmm.default(_widened(input), left, right, beta=beta, alpha=alpha)

    return _run(MatrixProduct(), mat1, mat2, True, finish, cpu_op)
