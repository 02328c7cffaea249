"""Builders of the emulated MLU's kernels, one per numerics op class (``docs/device.md``).

Kernels take the ATen overload's arguments as CPU tensors (``mluverify.device.kernels``) and
follow the active numerics settings (``mluverify.device.numerics``):

* ``elementwise(op)``: the op itself, in the storage precision (float16 results rounded to
  float16 per op, as the CPU does);
* ``accumulating(op)``: float16 tensors widened to float32, the op computed there by the CPU,
  floating results rounded back to float16 once; arguments the op writes (running
  statistics) are written back in their own dtype. For accumulating ops without a per-core
  model of their own (upsampling, inference batch-norm, backward ops);
* ``matmul(op, operands, weight, bias)``: a generic product whose arithmetic is the CPU's:
  operands prepared by ``numerics.matmul_operand`` (quantized and dequantized on MLU270,
  TF32-rounded on MLU370, float16 widened; the weight once per version), bias widened,
  floating results back in the first operand's dtype. For products without a kernel of their
  own (the convolution backward);
* the reductions (``REDUCTIONS``: per-core sums, ``mluverify.device.reductions``) and the
  matmul class (``CONTRACTIONS``: ``mluverify.device.contractions``), ready-made kernels by
  ATen name.

Every reduction kernel computes float16 and float32 inputs in float32 with ``active_cores()``
cores (``cnnl`` layer by layer: ``numerics.LAYER_BY_LAYER_CORES``; ``cnml`` fused: the core
number) and rounds floating results to the output dtype once; other dtypes (and an explicit
``dtype=`` other than float16 / float32) compute as the CPU does.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from mluverify.device import _weight_cache, contractions, reductions
from mluverify.device._dispatch import UNANNOTATED_WRITES
from mluverify.device.numerics import active_cores, active_profile, active_settings, matmul_operand, to_compute

_HALF = torch.float16
_FLOATING = (torch.float16, torch.float32)
aten = torch.ops.aten


def elementwise(op: Callable) -> Callable:
    """Elementwise ops compute in the storage precision: the CPU op is exactly that."""
    return op


def correctly_rounded(op: torch._ops.OpOverload) -> Callable:
    """float16 / float32 in: the op in float64, rounded once to the input's dtype (in-place
    forms write the rounded result into their first argument)."""
    in_place = bool(_written_positions(op))

    def kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        if dtype not in _FLOATING:
            return op(*args, **kwargs)
        wide = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        result = op(*wide, **kwargs)
        if result.dtype != torch.float64:  # promoted beyond the input's kind (a complex exponent): as torch computes it
            return op(*args, **kwargs)
        result = _rounded(result, dtype)
        return args[0].copy_(result) if in_place else result

    kernel.__name__ = f"correctly_rounded_{op._schema.name.split('::')[-1]}"
    return kernel


def _rounded(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 ``x`` rounded once to ``dtype`` (torch goes to float16 through float32, rounding
    twice; numpy's conversion rounds once)."""
    if dtype == _HALF:
        return torch.from_numpy(x.numpy().astype(np.float16))
    return x.to(dtype)


def _any_half(values) -> bool:
    for value in values:
        if isinstance(value, torch.Tensor) and value.dtype == _HALF:
            return True
        if isinstance(value, (list, tuple)) and _any_half(value):
            return True
    return False


def _widen(value: Any, profile) -> Any:
    if isinstance(value, torch.Tensor):
        return to_compute(value, profile)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_widen(v, profile) for v in value)
    return value


def _narrow(value: Any, dtype: torch.dtype = _HALF) -> Any:
    """Floating tensors (in lists and tuples too) of another floating dtype cast to ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, (list, tuple)):
        return type(value)(_narrow(v, dtype) for v in value)
    return value


def _written_positions(op: torch._ops.OpOverload) -> tuple[int, ...]:
    return tuple(
        i for i, arg in enumerate(op._schema.arguments)
        if (arg.alias_info is not None and arg.alias_info.is_write) or arg.name in UNANNOTATED_WRITES
    )


def accumulating(op: torch._ops.OpOverload) -> Callable:
    """float16 in, float32 arithmetic and accumulation, float16 out (rounded once)."""
    written = _written_positions(op)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if not (_any_half(args) or _any_half(kwargs.values())):
            return op(*args, **kwargs)
        profile = active_profile()
        wide_args = [_widen(a, profile) for a in args]
        result = op(*wide_args, **{k: _widen(v, profile) for k, v in kwargs.items()})
        for i in written:
            if i < len(args) and isinstance(args[i], torch.Tensor) and wide_args[i] is not args[i]:
                args[i].copy_(wide_args[i])
        return _narrow(result)

    kernel.__name__ = f"accumulating_{op._schema.name.split('::')[-1]}"
    return kernel


def matmul(op: Callable, operands: tuple[int, ...], weight: int | None, bias: int | None) -> Callable:
    """A product kernel with the CPU's arithmetic: ``operands`` are the positions of multiplied
    tensors, ``weight`` the one whose preparation is cached, ``bias`` the added one (widened)."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        settings = active_settings()
        dtype = args[operands[0]].dtype
        if dtype not in _FLOATING:
            return op(*args, **kwargs)
        prepared = list(args)
        for i in operands:
            if args[i] is not None:
                prepared[i] = _operand(args[i], settings, cached=i == weight)
        if bias is not None and args[bias] is not None:
            prepared[bias] = to_compute(args[bias], settings.profile)
        return _narrow(op(*prepared, **kwargs), dtype)

    kernel.__name__ = f"matmul_{getattr(op, '__name__', 'op')}"
    return kernel


def _operand(x: torch.Tensor, settings, cached: bool) -> torch.Tensor:
    if not cached:
        return matmul_operand(x, settings)
    return _weight_cache.cached(x, ("operand", settings), lambda: matmul_operand(x, settings))


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------


def _computes(x: torch.Tensor, dtype: torch.dtype | None = None) -> bool:
    """Whether the per-core model applies: a float16 / float32 input and result, with elements
    (an empty input accumulates nothing: its result, empty or the reduction's identity, is the
    op's definition, which the CPU's kernel gives)."""
    return x.dtype in _FLOATING and (dtype is None or dtype in _FLOATING) and x.numel() > 0


def _f32(x: torch.Tensor | None) -> torch.Tensor | None:
    return None if x is None else x.to(torch.float32)


def _sum_kernel(op: Callable, mean: bool) -> Callable:
    def kernel(self: torch.Tensor, dim: Sequence[int] | None = None, keepdim: bool = False, *,
               dtype: torch.dtype | None = None) -> torch.Tensor:
        if not _computes(self, dtype):
            return op(self, dim, keepdim, dtype=dtype)
        reduce = reductions.core_mean if mean else reductions.core_sum
        result = reduce(_f32(self), dim, active_cores(), keepdim)
        return result.to(dtype or self.dtype)

    return kernel


def _full_reduction(dim_kernel: Callable) -> Callable:
    def kernel(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        return dim_kernel(self, None, False, dtype=dtype)

    return kernel


def _variance_kernel(op: Callable, std: bool) -> Callable:
    def kernel(self: torch.Tensor, dim: Sequence[int] | None = None, *, correction: float | None = None,
               keepdim: bool = False) -> torch.Tensor:
        if not _computes(self):
            return op(self, dim, correction=correction, keepdim=keepdim)
        variance = reductions.core_var(_f32(self), dim, active_cores(), 1 if correction is None else correction,
                                       keepdim)
        return (reductions.sqrt(variance) if std else variance).to(self.dtype)

    return kernel


def _softmax_kernel(op: Callable, log: bool) -> Callable:
    def kernel(self: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
        if not _computes(self):
            return op(self, dim, half_to_float)
        result = reductions.softmax(_f32(self), dim, active_cores(), log=log)
        return result if half_to_float else result.to(self.dtype)

    return kernel


def _safe_softmax(self: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``_safe_softmax`` (attention's softmax): a row of only -inf gives zeros, not NaN."""
    x = self if dtype is None else self.to(dtype)
    out = _softmax_kernel(aten._softmax.default, log=False)(x, dim, False)
    return out.masked_fill((x == float("-inf")).all(dim, keepdim=True), 0)


def _statistics_dtype(input: torch.Tensor, weight: torch.Tensor | None) -> torch.dtype:
    """The dtype the CPU returns a norm's statistics in: the parameters', else the input's."""
    return weight.dtype if weight is not None else input.dtype


def _batch_norm_kernel(op: Callable, running: bool) -> Callable:
    """``native_batch_norm`` / ``_native_batch_norm_legit``: training computes per-core batch
    statistics; inference (running statistics) is elementwise, computed as ``accumulating``."""
    inference = accumulating(op)

    def kernel(input, weight, bias, *rest):
        running_mean, running_var, training, momentum, eps = rest if running else (None, None, *rest)
        if not (training and _computes(input)):
            return inference(input, weight, bias, *rest)
        out, mean, invstd = reductions.batch_norm_training(
            _f32(input), _f32(weight), _f32(bias), running_mean, running_var, momentum, eps, active_cores())
        statistics = _statistics_dtype(input, weight)
        return out.to(input.dtype), mean.to(statistics), invstd.to(statistics)

    return kernel


def _layer_norm(input, normalized_shape, weight, bias, eps):
    if not _computes(input):
        return aten.native_layer_norm.default(input, normalized_shape, weight, bias, eps)
    out, mean, rstd = reductions.layer_norm(_f32(input), normalized_shape, _f32(weight), _f32(bias), eps,
                                            active_cores())
    statistics = _statistics_dtype(input, weight)
    return out.to(input.dtype), mean.to(statistics), rstd.to(statistics)


def _group_norm(input, weight, bias, n, channels, hw, group, eps):
    if not _computes(input):
        return aten.native_group_norm.default(input, weight, bias, n, channels, hw, group, eps)
    out, mean, rstd = reductions.group_norm(_f32(input), _f32(weight), _f32(bias), n, channels, hw, group, eps,
                                            active_cores())
    statistics = _statistics_dtype(input, weight)
    return out.to(input.dtype), mean.to(statistics), rstd.to(statistics)


def _expanded(values: Sequence[int] | int, nd: int) -> list[int]:
    values = [values] if isinstance(values, int) else list(values)
    return values * nd if len(values) == 1 else values


def _avg_pool_kernel(op: Callable, nd: int) -> Callable:
    def kernel(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
        if not _computes(self):
            return op(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        kernel_size = _expanded(kernel_size, nd)
        stride = _expanded(stride, nd) if stride else kernel_size
        result = reductions.avg_pool(_f32(self), kernel_size, stride, _expanded(padding, nd), ceil_mode,
                                     count_include_pad, divisor_override, active_cores())
        return result.to(self.dtype)

    return kernel


def _adaptive_avg_pool_kernel(op: Callable) -> Callable:
    def kernel(self, output_size):
        if not _computes(self):
            return op(self, output_size)
        return reductions.adaptive_avg_pool(_f32(self), list(output_size), active_cores()).to(self.dtype)

    return kernel


def _reduction_kernels() -> dict[str, Callable]:
    sum_dim = _sum_kernel(aten.sum.dim_IntList, mean=False)
    mean_dim = _sum_kernel(aten.mean.dim, mean=True)
    return {
        "sum": _full_reduction(sum_dim), "sum.dim_IntList": sum_dim,
        "mean": _full_reduction(mean_dim), "mean.dim": mean_dim,
        "var.correction": _variance_kernel(aten.var.correction, std=False),
        "std.correction": _variance_kernel(aten.std.correction, std=True),
        "_softmax": _softmax_kernel(aten._softmax.default, log=False),
        "_log_softmax": _softmax_kernel(aten._log_softmax.default, log=True),
        "_safe_softmax": _safe_softmax,
        "native_batch_norm": _batch_norm_kernel(aten.native_batch_norm.default, running=True),
        "_native_batch_norm_legit": _batch_norm_kernel(aten._native_batch_norm_legit.default, running=True),
        "_native_batch_norm_legit.no_stats": _batch_norm_kernel(aten._native_batch_norm_legit.no_stats,
                                                                running=False),
        "native_layer_norm": _layer_norm,
        "native_group_norm": _group_norm,
        # avg_pool1d is CompositeImplicitAutograd: a kernel of its own would hide its autograd
        # formula; it reaches avg_pool2d.
        "avg_pool2d": _avg_pool_kernel(aten.avg_pool2d.default, 2),
        "avg_pool3d": _avg_pool_kernel(aten.avg_pool3d.default, 3),
        "_adaptive_avg_pool2d": _adaptive_avg_pool_kernel(aten._adaptive_avg_pool2d.default),
        "_adaptive_avg_pool3d": _adaptive_avg_pool_kernel(aten._adaptive_avg_pool3d.default),
    }


REDUCTIONS: dict[str, Callable] = _reduction_kernels()
CONTRACTIONS: dict[str, Callable] = {
    "convolution_overrideable": contractions.convolution,
    "mm": contractions.mm,
    "bmm": contractions.bmm,
    "addmm": contractions.addmm,
    # an op of the fused engine (fusion.fusible.FUSIBLE_OPS), so layer by layer too: seed 001 "任何已经实现的算子
    # 都可以同时采用在线逐层、在线融合和离线模式" (any implemented op runs layer by layer, fused and offline)
    "baddbmm": contractions.baddbmm,
    "addmv": contractions.addmv,
    "dot": contractions.dot,
    "mv": contractions.mv,
}
