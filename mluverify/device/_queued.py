"""Queuing one op: its outputs now (from torch's meta kernels), its computation on the worker.

An op can be queued when torch can tell its outputs' shapes, dtypes and strides without its
data: it runs on meta tensors; the fresh outputs are allocated on the card right away and the
caller gets them (or, for an in-place op, its argument) at once. On the worker the kernel runs
on the CPU aliases taken when the op was issued, and each fresh result is copied into its
output (``fill``). An op whose outputs depend on its data (``nonzero``, ``masked_select``), or
that has no meta kernel, is not queued: ``plan`` returns None and the caller runs it at once,
after the work it depends on.

This module plans from an op and its arguments only; ``_dispatch.OpRunner`` submits the op to
its queue with the plan (so this module needs nothing of the dispatcher's).
"""
from __future__ import annotations

import threading
from typing import Any

import torch

from mluverify.device._numbers import wrapped_number
from mluverify.device._storage import DEVICE_TYPE

Geometry = tuple[tuple[int, ...], tuple[int, ...], torch.dtype]  # an output's size, stride, dtype
_META = torch.device("meta")
PLAN_CACHE_ENTRIES = 4096
# Ops whose meta kernel torch registers under another overload with the same arguments.
_META_EQUIVALENTS = {torch.ops.aten.convolution_overrideable.default: torch.ops.aten.convolution.default}
_EMPTY = torch.empty(0, device=_META)


def _eval_batch_norm_stats(results: tuple, args: tuple, kwargs: dict) -> tuple:
    """Batch norm in eval mode: the CPU kernels return empty saved statistics, meta full ones."""
    training = kwargs.get("training", args[5] if len(args) > 5 else False)
    return results if training else (results[0], _EMPTY.to(results[1].dtype), _EMPTY.to(results[2].dtype))


def _bool_power(results: tuple, args: tuple, kwargs: dict) -> tuple:
    """``pow(bool tensor, bool)``: the CPU kernel keeps bool, the meta kernel says int64."""
    exponent = args[1] if len(args) > 1 else kwargs.get("exponent")
    both_bool = args[0].dtype == torch.bool and isinstance(exponent, bool)
    return (results[0].to(torch.bool),) if both_bool else results


# Where torch's CPU kernels and meta kernels disagree on a result's shape or dtype (found by
# suites/conformance, which also runs every OpInfo sample on a queue): the CPU's.
_CPU_RESULTS = {
    torch.ops.aten.native_batch_norm.default: _eval_batch_norm_stats,
    torch.ops.aten._native_batch_norm_legit.default: _eval_batch_norm_stats,
    torch.ops.aten._native_batch_norm_legit_no_training.default:
        lambda results, args, kwargs: _eval_batch_norm_stats(results, args[:5] + (False,), {}),
    torch.ops.aten.pow.Tensor_Scalar: _bool_power,
}
# ... and where the disagreement depends on more than the arguments' metadata (embedding_bag's
# CPU kernel returns empty bookkeeping tensors in some modes): these run at once, never queued.
_NOT_PLANNED = frozenset({torch.ops.aten._embedding_bag_forward_only.default, torch.ops.aten._embedding_bag.default})


def _to_meta(value: Any) -> Any:
    """Device tensors as meta tensors; CPU tensors (0-dim operands) stay: meta kernels accept them."""
    if isinstance(value, torch.Tensor) and value.device.type == DEVICE_TYPE:
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=_META)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_to_meta(v) for v in value)
    if isinstance(value, torch.device) and value.type == DEVICE_TYPE:
        return _META
    return value


class _Plans:
    """Output geometries by op and argument signature: a meta kernel can cost milliseconds (batch
    norm's is a Python decomposition), a network issues the same calls every forward."""

    def __init__(self) -> None:
        self.geometries: dict[tuple, tuple[Geometry, ...] | None] = {}
        self.lock = threading.Lock()

    def get(self, op: torch._ops.OpOverload, tensor_positions: frozenset[int], args: tuple,
            kwargs: dict) -> tuple[Geometry, ...] | None:
        key = (op, _signature(args), _signature(tuple(kwargs.items())))
        try:
            return self.geometries[key]
        except KeyError:
            pass
        except TypeError:  # an argument that cannot be hashed: plan without the cache
            return meta_results(op, tensor_positions, args, kwargs)
        planned = meta_results(op, tensor_positions, args, kwargs)
        with self.lock:
            if len(self.geometries) >= PLAN_CACHE_ENTRIES:
                del self.geometries[next(iter(self.geometries))]
            self.geometries[key] = planned
        return planned


def _signature(value: Any) -> Any:
    """What the output geometry of a call can depend on: tensors' device type, dtype, size and
    stride; every other argument's type and value."""
    if isinstance(value, torch.Tensor):
        return value.device.type, value.dtype, tuple(value.size()), value.stride()
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_signature(v) for v in value))
    return type(value).__name__, value


def meta_results(op: torch._ops.OpOverload, tensor_positions: frozenset[int], args: tuple,
                 kwargs: dict) -> tuple[Geometry, ...] | None:
    """The geometry of the op's results from its meta kernel (one per schema return), or None
    when torch cannot tell it without the data. ``tensor_positions``: the positional arguments
    the schema types as tensors (a Python number there is a wrapped number)."""
    if op in _NOT_PLANNED:
        return None
    meta_args = [wrapped_number(v) if isinstance(v, (bool, int, float, complex)) and i in tensor_positions
                 else _to_meta(v) for i, v in enumerate(args)]
    meta_kwargs = {k: _to_meta(v) for k, v in kwargs.items()}
    try:
        result = _META_EQUIVALENTS.get(op, op)(*meta_args, **meta_kwargs)
    except Exception:  # noqa: BLE001 - no meta kernel, data-dependent shape, bad arguments: run now
        return None
    results = (result,) if isinstance(result, torch.Tensor) else tuple(result or ())
    correct = _CPU_RESULTS.get(op)
    results = results if correct is None else correct(results, args, kwargs)
    return tuple((tuple(r.size()), r.stride(), r.dtype) for r in results)


_PLANS = _Plans()


def plan(op: torch._ops.OpOverload, tensor_positions: frozenset[int], args: tuple,
         kwargs: dict) -> tuple[Geometry, ...] | None:
    """The geometry of each result of queuing ``op`` on ``args``, or None when it must run now."""
    return _PLANS.get(op, tensor_positions, args, kwargs)


def fill(op_name: str, host: torch.Tensor, result: torch.Tensor) -> None:
    """Copy a kernel's result into the (CPU alias of the) output planned for it."""
    if result.shape != host.shape or result.dtype != host.dtype:
        raise RuntimeError(f"{op_name}: the kernel returned {result.dtype} {list(result.shape)} where torch's "
                           f"meta kernel gave {host.dtype} {list(host.shape)}")
    host.copy_(result)
