"""Quantized weights, computed once per weight version on the device.

Quantizing and planning ResNet50's 25 M weights on every forward costs more than its convs.
The result is kept per device buffer (serial number, write generation, view geometry) and
quantization parameters; any write to the weight's device memory bumps the generation and so
invalidates the entry. Plain CPU tensors (direct calls) are not cached.
"""
from __future__ import annotations

import collections
from typing import Callable, Hashable

import torch

from mluverify.device.quantization._integer import QuantizedWeight

CAPACITY_BYTES = 1024 * 2**20

_entries: collections.OrderedDict[tuple, QuantizedWeight] = collections.OrderedDict()
_held_bytes = 0


def _buffer_key(weight: torch.Tensor) -> tuple | None:
    from mluverify.device._storage import buffer_by_cpu_pointer

    buffer = buffer_by_cpu_pointer(weight.untyped_storage().data_ptr())
    if buffer is None:
        return None
    return (buffer.serial, buffer.generation, weight.storage_offset(), tuple(weight.size()),
            tuple(weight.stride()), weight.dtype)


def cached_weight(weight: torch.Tensor, params: Hashable,
                  compute: Callable[[], QuantizedWeight]) -> QuantizedWeight:
    """``compute()``, reused while ``weight``'s device memory and ``params`` are unchanged."""
    global _held_bytes
    buffer_key = _buffer_key(weight)
    if buffer_key is None:
        return compute()
    key = (buffer_key, params)
    hit = _entries.get(key)
    if hit is not None:
        _entries.move_to_end(key)
        return hit
    value = _entries[key] = compute()
    _held_bytes += value.values.nbytes
    while _held_bytes > CAPACITY_BYTES and len(_entries) > 1:
        _, evicted = _entries.popitem(last=False)
        _held_bytes -= evicted.values.nbytes
    return value


def clear() -> None:
    """Drop every cached weight."""
    global _held_bytes
    _entries.clear()
    _held_bytes = 0
