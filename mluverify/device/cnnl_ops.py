"""Builders of CNNL kernels, one per numerics op class (see ``numerics``).

Each builder takes the CPU ATen overload that does the arithmetic and returns a kernel that
follows the active profile (calling convention: ``mluverify.device.kernels``):

* ``elementwise(op)``: the op itself, in the storage precision (float16 results are rounded to
  float16 per op, as the CPU does);
* ``accumulating(op)``: float16 tensors widened to the profile's compute dtype (float32), the
  op computed there, floating results rounded back to float16 once; arguments the op writes
  (running statistics) are written back in their own dtype;
* ``matmul(op, ...)``: inputs prepared by ``numerics.matmul_input`` (float16 widened, float32
  maybe TF32-rounded, weights through a cache), bias widened only, result rounded to float16
  when the input was float16.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from mluverify.device import _weight_cache
from mluverify.device._dispatch import UNANNOTATED_WRITES
from mluverify.device.numerics import active_profile, matmul_input, to_compute

_HALF = torch.float16


def elementwise(op: Callable) -> Callable:
    """Elementwise ops compute in the storage precision: the CPU op is exactly that."""
    return op


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


def _narrow(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(_HALF) if value.dtype == torch.float32 else value
    if isinstance(value, (list, tuple)):
        return type(value)(_narrow(v) for v in value)
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
    """A conv/matmul kernel: ``operands`` are the positions of multiplied tensors, ``weight``
    the one whose rounding may be cached, ``bias`` the added one (widened, never rounded)."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        profile = active_profile()
        first = args[operands[0]]
        if first.dtype not in (_HALF, torch.float32):
            return op(*args, **kwargs)
        prepared = list(args)
        for i in operands:
            if args[i] is not None:
                prepare = _weight_cache.cached_matmul_input if i == weight else matmul_input
                prepared[i] = prepare(args[i], profile)
        if bias is not None and args[bias] is not None:
            prepared[bias] = to_compute(args[bias], profile)
        result = op(*prepared, **kwargs)
        return _narrow(result) if first.dtype == _HALF else result

    kernel.__name__ = f"matmul_{getattr(op, '__name__', 'op')}"
    return kernel
