"""Reduced-precision copies of conv/matmul weights, rounded once per weight version.

Rounding a ResNet-50's 25 M weights to TF32 on every forward costs more than the convolutions'
Python overhead budget, so the rounded copy is kept, keyed by the weight's device buffer
(a serial number, never reused) and the view's geometry, and tagged with the buffer's write
generation: a write through the device (any kernel, fallback or copy) bumps the generation,
and the next use rounds again and replaces the entry. Entries go when their buffer is freed,
and the oldest go beyond ``CAPACITY_BYTES``. Tensors that are not device buffers (plain CPU
tensors passed to a kernel) are not cached.
"""
from __future__ import annotations

import collections

import torch

from mluverify.device import _storage
from mluverify.device.numerics import NumericsProfile, matmul_input

CAPACITY_BYTES = 512 * 2**20

# key -> (write generation, rounded copy); key[0] is the buffer's serial number.
_entries: collections.OrderedDict[tuple, tuple[int, torch.Tensor]] = collections.OrderedDict()
_keys_by_serial: dict[int, set[tuple]] = {}
_held_bytes = 0


def cached_matmul_input(x: torch.Tensor, profile: NumericsProfile) -> torch.Tensor:
    """``matmul_input(x, profile)``, reused while ``x``'s device memory is unchanged."""
    if x.dtype != torch.float32 or not profile.reduces_float32_matmul:
        return matmul_input(x, profile)
    version = _storage.buffer_version(x)
    if version is None:
        return matmul_input(x, profile)
    serial, generation = version
    key = (serial, x.storage_offset(), tuple(x.size()), tuple(x.stride()), profile.matmul_float32_mantissa_bits)
    entry = _entries.get(key)
    if entry is not None and entry[0] == generation:
        _entries.move_to_end(key)
        return entry[1]
    rounded = matmul_input(x, profile)
    _store(key, generation, rounded)
    return rounded


def _store(key: tuple, generation: int, rounded: torch.Tensor) -> None:
    global _held_bytes
    _drop(key)
    _entries[key] = (generation, rounded)
    _keys_by_serial.setdefault(key[0], set()).add(key)
    _held_bytes += rounded.nbytes
    while _held_bytes > CAPACITY_BYTES and len(_entries) > 1:
        _drop(next(iter(_entries)))


def _drop(key: tuple) -> None:
    global _held_bytes
    entry = _entries.pop(key, None)
    if entry is not None:
        _held_bytes -= entry[1].nbytes
        keys = _keys_by_serial[key[0]]
        keys.discard(key)
        if not keys:
            del _keys_by_serial[key[0]]


def forget_buffer(serial: int) -> None:
    """Drop the copies made from a freed device buffer."""
    for key in list(_keys_by_serial.get(serial, ())):
        _drop(key)


def clear() -> None:
    """Drop every cached copy (``mlu_model.empty_cache``)."""
    global _held_bytes
    _entries.clear()
    _keys_by_serial.clear()
    _held_bytes = 0


def held_bytes() -> int:
    return _held_bytes


_storage.release_listeners.append(forget_buffer)
