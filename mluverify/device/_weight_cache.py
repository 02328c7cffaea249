"""Prepared copies of conv/matmul weights (quantized, TF32-rounded), made once per weight version.

Quantizing or rounding a ResNet-50's 25 M weights on every forward costs more than the
convolutions' Python overhead budget, so the prepared copy is kept, keyed by what the weight is
and by the recipe that prepared it (MLU370 keeps the TF32 rounding of the activations a product
reads from device memory too: a training step multiplies each convolution's input and
grad_output twice):

* a CPU alias of device memory (what a kernel receives): the device buffer (a serial number,
  never reused) and the view's geometry, tagged with the buffer's write generation. A write
  through the device (any kernel, fallback or copy) bumps the generation, and the next use
  prepares again and replaces the entry;
* a plain CPU tensor (a fused group's constant, or a kernel called directly): the tensor object
  itself, tagged with its version counter (in-place ops bump it); the entry goes with the tensor.

Entries go when their buffer or tensor is freed, and the oldest go beyond ``CAPACITY_BYTES``.
"""
from __future__ import annotations

import collections
import weakref
from typing import Callable, Hashable, TypeVar

import torch

from mluverify.device import _storage

CAPACITY_BYTES = 512 * 2**20
T = TypeVar("T")

# key -> (stamp, prepared value, bytes held); key[0] is the owner: a buffer serial or ("tensor", id).
_entries: collections.OrderedDict[tuple, tuple[int, object, int]] = collections.OrderedDict()
_keys_by_owner: dict[Hashable, set[tuple]] = {}
_held_bytes = 0


def _owner_and_stamp(x: torch.Tensor) -> tuple[Hashable, int, tuple]:
    version = _storage.buffer_version(x)
    geometry = (x.storage_offset(), tuple(x.size()), tuple(x.stride()), x.dtype)
    if version is not None:
        serial, generation = version
        return serial, generation, geometry
    owner = ("tensor", id(x))
    if owner not in _keys_by_owner:
        weakref.finalize(x, forget, owner)
    return owner, x._version, geometry


def cached(x: torch.Tensor, recipe: Hashable, prepare: Callable[[], T]) -> T:
    """``prepare()`` (a tensor, or an object with a ``values`` tensor), reused while ``x`` and
    ``recipe`` are unchanged."""
    owner, stamp, geometry = _owner_and_stamp(x)
    key = (owner, geometry, recipe)
    entry = _entries.get(key)
    if entry is not None and entry[0] == stamp:
        _entries.move_to_end(key)
        return entry[1]
    value = prepare()
    _store(key, stamp, value)
    return value


def cached_device_memory(x: torch.Tensor, recipe: Hashable, prepare: Callable[[], T]) -> T:
    """``cached`` where ``x`` is device memory; a plain CPU tensor (a kernel's temporary, which
    nothing reads twice) is prepared and not kept."""
    if _storage.buffer_version(x) is None:
        return prepare()
    return cached(x, recipe, prepare)


def _nbytes(value: object) -> int:
    tensor = value if isinstance(value, torch.Tensor) else getattr(value, "values", None)
    return tensor.nbytes if isinstance(tensor, torch.Tensor) else 0


def _store(key: tuple, stamp: int, value: object) -> None:
    global _held_bytes
    _drop(key)
    size = _nbytes(value)
    _entries[key] = (stamp, value, size)
    _keys_by_owner.setdefault(key[0], set()).add(key)
    _held_bytes += size
    while _held_bytes > CAPACITY_BYTES and len(_entries) > 1:
        _drop(next(iter(_entries)))


def _drop(key: tuple) -> None:
    global _held_bytes
    entry = _entries.pop(key, None)
    if entry is not None:
        _held_bytes -= entry[2]
        _keys_by_owner.get(key[0], set()).discard(key)


def forget(owner: Hashable) -> None:
    """Drop the copies made from a freed device buffer (its serial) or CPU tensor."""
    for key in list(_keys_by_owner.pop(owner, ())):
        _drop(key)


def clear() -> None:
    """Drop every cached copy (``mlu_model.empty_cache``)."""
    global _held_bytes
    _entries.clear()
    _keys_by_owner.clear()
    _held_bytes = 0


def held_bytes() -> int:
    return _held_bytes


_storage.release_listeners.append(forget)
