"""The matmul class on the emulated MLU: convolution (every kind), mm, addmm, bmm, baddbmm, mv, addmv and dot, as pure
functions on CPU tensors (the kernels of ``mluverify.device.builtin_kernels``).

How a product ``left x right`` (``right`` the weight) is computed, by the active settings
(``mluverify.device.numerics``); float16 inputs are widened exactly to float32 first and the
result is rounded to float16 once, at the end:

* **MLU270, quantized** (matmul precision int8 / int16 / int31, int16 by default): each
  operand is quantized symmetrically per tensor (``numerics.quantize``: scale
  ``qmax / absmax``, round half to even). The model is exact integer accumulation, then
  ``y = fl32(acc) / fl32(scale_left * scale_right)`` and the bias in float32. int8 and int31
  compute just that, accumulating the integers in float32 (exact while every partial sum stays
  below 2**24: any int8 product of at most 1040 terms) and float64 (int31). int16, whose
  products need 30 bits, multiplies the dequantized operands (``numerics.dequantized``:
  ``q * fl32(1 / scale)``) with the CPU's float32 kernel, bias included: the same sum, rounded
  in float32 (measured at 0.3 % of the quantization error, docs/device.md). The model's
  partial sums are exact integers, so the core split of the reduced dimension changes nothing
  and is not computed. An operand holding Inf or NaN has no scale: that call computes as the
  ``float`` setting does.
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
import torch.nn.functional as F

from mluverify.device import _weight_cache
from mluverify.device.kernels import active_mode
from mluverify.device.numerics import (
    QMAX, NumericsSettings, Quantized, active_cores, active_settings, dequantized, quantize, round_mantissa)
from mluverify.device.reductions import combine_pairwise

_F16, _F32 = torch.float16, torch.float32
_ONEDNN = torch.backends.mkldnn.is_available()
_FLOATING = (_F16, _F32)
aten = torch.ops.aten


class Product:
    """A bilinear product of two operands. ``split_right`` and ``partials`` compute it with the
    reduced dim split into ``cores`` contiguous parts of ``ceil(E / cores)`` (zero-padded: an
    empty part adds +0), all parts in one call of the CPU's kernel."""

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        """``right`` laid out for ``partials`` (prepared once for a weight)."""
        raise NotImplementedError

    def partials(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        """The float32 product of each part, stacked in a last dim of size ``cores``."""
        raise NotImplementedError

    def combined(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        """The product: the ``partials`` (a fresh tensor) combined pairwise in float32."""
        return combine_partials(self.partials(left, split_right, cores))


def combine_partials(partials: torch.Tensor) -> torch.Tensor:
    """A product's fresh float32 ``partials`` (the cores in the last dim) combined pairwise
    (``reductions.combine_pairwise``) into a new contiguous tensor. Four partials (every layer
    by layer product) are combined by the device's C++ extension: the same float32 adds, in one
    pass on every intra-op thread instead of three passes over the partials."""
    if partials.shape[-1] == 4 and partials.dtype == torch.float32:
        return torch.ops.mluverify_native.combine4(partials)
    return combine_pairwise(partials, overwrite=True).contiguous()


def padded_split(x: torch.Tensor, dim: int, cores: int) -> torch.Tensor:
    """``x``'s dim ``dim`` zero-padded to a multiple of ``cores`` and split into (cores, part)
    (an empty part is all zeros: it adds +0)."""
    extent = x.shape[dim]
    size = -(-extent // cores)
    if size * cores != extent:
        pad = [0, 0] * (x.dim() - 1 - dim % x.dim()) + [0, size * cores - extent]
        x = F.pad(x, pad)
    return x.unflatten(dim, (cores, size))


@dataclass(frozen=True)
class MatrixProduct(Product):
    """``left [..., M, K] @ right [..., K, N]`` (mm, bmm)."""

    def __call__(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return torch.matmul(left, right)

    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        return padded_split(right, -2, cores)  # [..., cores, K/cores, N]

    def partials(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        parts = padded_split(left, -1, cores).movedim(-2, -3)  # [..., cores, M, K/cores]
        return torch.matmul(parts, split_right).movedim(-3, -1)


@dataclass(frozen=True)
class ConvolutionProduct(Product):
    """``aten.convolution`` without bias; the reduced dim is the input channels of a group.
    Its parts are computed as one convolution with ``cores`` times the groups."""

    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int

    def __call__(self, left: torch.Tensor, right: torch.Tensor, groups: int | None = None) -> torch.Tensor:
        return aten.convolution.default(left, right, None, self.stride, self.padding, self.dilation,
                                        self.transposed, self.output_padding, groups or self.groups)

    def split_right(self, right: torch.Tensor, cores: int) -> torch.Tensor:
        groups = self.groups
        if self.transposed:  # [C_in, C_out/g, *k]: input channels (g, part, c) in dim 0
            split = padded_split(right.unflatten(0, (groups, -1)), 1, cores)
            return split.flatten(0, 2)
        # [C_out, C_in/g, *k] -> one group per (g, part): [(g, part, C_out/g), c, *k]
        split = padded_split(right.unflatten(0, (groups, -1)), 2, cores)  # [g, C_out/g, cores, c, *k]
        return split.transpose(1, 2).flatten(0, 2)

    def grouped(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        """The parts' products as the output of one call: channels ``(group, core, c)``."""
        groups = self.groups
        inputs = padded_split(left.unflatten(1, (groups, -1)), 2, cores).flatten(1, 3)  # channels (g, part, c)
        return self(inputs, split_right, groups * cores)

    def partials(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        return _cores_apart(self.grouped(left, split_right, cores), self.groups, cores).flatten(1, 2)

    def combined(self, left: torch.Tensor, split_right: torch.Tensor, cores: int) -> torch.Tensor:
        # The partials combined before their channels are merged: merging them first copies all
        # cores' products (the cores sit between a group's channels), ~10% of an MLU370 training
        # step; the same float32 adds. The result is row-major.
        grouped = self.grouped(left, split_right, cores)
        return combine_partials(_cores_apart(grouped, self.groups, cores)).flatten(1, 2)


def _cores_apart(out: torch.Tensor, groups: int, cores: int) -> torch.Tensor:
    """A grouped call's output, channels ``(group, core, c)``, as a view with channel dims
    ``(group, c)`` and the cores in a last dim."""
    return out.unflatten(1, (groups, cores, -1)).movedim(2, -1)


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


Tensor2 = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class WeightLayout:
    """How a fused engine keeps a prepared weight for the CPU kernel that multiplies it (e.g.
    oneDNN's blocked convolution weights): ``pack(weight)`` once, ``op(input, packed)`` per call;
    ``key`` says what the packing depends on."""

    key: tuple
    pack: Callable[[torch.Tensor], torch.Tensor]
    op: Tensor2


@dataclass(frozen=True)
class ProductCall:
    """One call of a matmul-class op: its bilinear ``product``; ``finish`` adds the bias (and
    alpha / beta) to a bare float32 product; ``cpu_op`` is the whole op by the CPU's float32
    kernel; ``weight``: the right operand is a weight, prepared once per version; ``layout``:
    how a fused engine keeps that weight (None: as a plain tensor for ``cpu_op``)."""

    product: Product
    finish: Callable[[torch.Tensor], torch.Tensor]
    cpu_op: Tensor2
    weight: bool = True
    layout: WeightLayout | None = None


def device_result(call: ProductCall, left: torch.Tensor, right: torch.Tensor, settings: NumericsSettings,
                  cores: int) -> torch.Tensor:
    """The op's float32 result as the device computes it (see the module docstring)."""
    qmax = settings.qmax
    if qmax is not None:
        result = _quantized_result(call, left, right, qmax)
        if result is not None:
            return result
    bits = settings.profile.matmul_float32_mantissa_bits
    if bits is None:
        return call.cpu_op(_widened(left), _widened(right))
    def operand(x: torch.Tensor, keep: bool = True) -> torch.Tensor:  # float16 is exact in TF32 already
        if x.dtype != _F32:
            return _widened(x)
        if not keep:  # a weight: its prepared copy is kept instead
            return round_mantissa(x, bits)
        # An activation's rounding is kept while its device memory is unchanged: a convolution's
        # backward multiplies its input (rounded by the forward) and its grad_output twice.
        return _weight_cache.cached_device_memory(x, ("mantissa", bits), lambda: round_mantissa(x, bits))

    product = call.product
    keep_right = not call.weight
    if cores == 1:
        right = _prepared(right, ("mantissa", bits), lambda: operand(right, keep_right), call.weight)
        return call.finish(product(operand(left), right))
    split = _prepared(right, ("mantissa", bits, product, cores),
                      lambda: product.split_right(operand(right, keep_right), cores), call.weight)
    return call.finish(product.combined(operand(left), split, cores))


def _quantized_result(call: ProductCall, left: torch.Tensor, right: torch.Tensor, qmax: int) -> torch.Tensor | None:
    """The quantized op, or None when an operand cannot be quantized (Inf / NaN)."""
    if qmax == QMAX["int16"]:
        left_operand = dequantized(left, qmax)
        layout = call.layout
        if layout is None:
            right_operand = _prepared(right, ("dequantized", qmax), lambda: dequantized(right, qmax), call.weight)
        else:
            right_operand = _prepared(right, ("dequantized", qmax, layout.key),
                                      lambda: _packed(dequantized(right, qmax), layout), call.weight)
        if left_operand is None or right_operand is None:
            return None
        return (call.cpu_op if layout is None else layout.op)(left_operand, right_operand)
    quantized_left = quantize(left, qmax)
    quantized_right = _prepared(right, ("quantized", qmax), lambda: quantize(right, qmax), call.weight)
    if quantized_left is None or quantized_right is None:
        return None
    return call.finish(quantized_product(call.product, quantized_left, quantized_right))


def _packed(weight: torch.Tensor | None, layout: WeightLayout) -> torch.Tensor | None:
    return None if weight is None else layout.pack(weight)


def _widened(x: torch.Tensor) -> torch.Tensor:
    return x.to(_F32) if x.dtype == _F16 else x


def _run(call: ProductCall, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """The op on the device's numerics, rounded to float16 at the end when the input was."""
    dtype = left.dtype
    if dtype not in _FLOATING:
        return call.cpu_op(left, right)
    result = device_result(call, left, right, active_settings(), active_cores())
    return result.to(dtype) if result.dtype != dtype else result


def _channel_shape(output: torch.Tensor) -> list[int]:
    return [1, -1] + [1] * (output.dim() - 2)


def _onednn_layout(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   product: "ConvolutionProduct") -> WeightLayout | None:
    """In a fused group, a 2-d convolution keeps its weight in oneDNN's blocked layout (an
    inference engine packs its weights once): the same float32 arithmetic, without reordering
    the weight on every call. None elsewhere (layer by layer, other convolutions, no oneDNN)."""
    if active_mode() != "cnml" or product.transposed or input.dim() != 4 or weight.dim() != 4 or not _ONEDNN:
        return None
    geometry = (product.padding, product.stride, product.dilation, product.groups)
    bias = None if bias is None else _widened(bias)

    def pack(w: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._reorder_convolution_weight(w, *geometry, list(input.shape))

    def op(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._convolution_pointwise(x, packed, bias, *geometry, "none", [], "")

    return WeightLayout(("onednn", geometry, tuple(input.shape)), pack, op)


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

    return _run(ProductCall(product, finish, cpu_op, layout=_onednn_layout(input, weight, bias, product)),
                input, weight)


def mm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``aten.mm`` as the device computes it (``right`` prepared once per version: a weight)."""
    return _run(ProductCall(MatrixProduct(), _bare, aten.mm.default), left, right)


def bmm(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``aten.bmm`` as the device computes it."""
    return _run(ProductCall(MatrixProduct(), _bare, aten.bmm.default, weight=False), left, right)


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1,
          alpha: float = 1) -> torch.Tensor:
    """``aten.addmm``: ``alpha * (mat1 @ mat2)`` (the device's product) ``+ beta * input``, in
    float32 (``input`` ignored when beta is 0, as BLAS does)."""
    return _added_product(aten.addmm.default, input, mat1, mat2, beta, alpha, weight=True)


def baddbmm(input: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *, beta: float = 1,
            alpha: float = 1) -> torch.Tensor:
    """``aten.baddbmm``: ``addmm`` of each batch (``bmm``'s product: no operand is a weight)."""
    return _added_product(aten.baddbmm.default, input, batch1, batch2, beta, alpha, weight=False)


def _added_product(cpu_added_op: Callable, input: torch.Tensor, left: torch.Tensor, right: torch.Tensor,
                   beta: float, alpha: float, weight: bool) -> torch.Tensor:
    """``alpha * (left @ right) + beta * input`` with the device's product, the rest in float32."""

    def finish(y: torch.Tensor) -> torch.Tensor:  # y is a fresh product: updated in place
        if alpha != 1:
            y.mul_(alpha)
        if beta == 0:
            return y
        added = _widened(input)
        return y.add_(added if beta == 1 else added * beta)

    def cpu_op(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return cpu_added_op(_widened(input), left, right, beta=beta, alpha=alpha)

    return _run(ProductCall(MatrixProduct(), finish, cpu_op, weight=weight), left, right)


def addmv(input: torch.Tensor, mat: torch.Tensor, vec: torch.Tensor, *, beta: float = 1,
          alpha: float = 1) -> torch.Tensor:
    """``aten.addmv`` (and ``mv``, which torch computes through it): ``addmm`` with the vector
    as a one-column matrix, so matrix-vector products are the matmul class too."""
    column = input.unsqueeze(-1) if input.dim() else input
    return addmm(column, mat, vec.unsqueeze(-1), beta=beta, alpha=alpha).squeeze(-1)


def mv(mat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """``aten.mv``: ``mat`` x the vector as a one-column matrix."""
    return _run(ProductCall(MatrixProduct(), _bare, aten.mm.default, weight=False), mat, vec.unsqueeze(-1)).squeeze(-1)


def dot(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``aten.dot``: ``mv`` of ``left`` as a one-row matrix."""
    return mv(left.unsqueeze(0), right).reshape(())


def _bare(y: torch.Tensor) -> torch.Tensor:
    return y
