"""Device memory of the emulated MLU: CPU buffers behind ``mlu`` storages, one pool per card.

An ``mlu`` tensor's storage is a real torch ``StorageImpl`` on device ``mlu:<card>`` whose data
pointer is the address of a CPU buffer owned here (torch gives a Python back end no allocator,
so the storage is built from a data pointer and does not own it). The buffer lives in
``_BUFFERS`` keyed by the storage's identity and is dropped by a finalizer when torch frees
the storage, so views made by C++ view kernels (which share the storage without calling
Python) always find their data, and the memory statistics count live storages exactly.

``as_cpu(t)`` is a CPU tensor aliasing ``t``'s bytes (same size, stride, offset, dtype), once
the queued work on them is finished (``_hazards``); ``wrap_cpu(c)`` adopts a CPU tensor's
memory as a new ``mlu`` tensor without copying.
"""
from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from dataclasses import dataclass

import torch

from mluverify.device import _hazards
from mluverify.device._backend import DEVICE_TYPE
from mluverify.errors import InvalidArgument

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle
_as_strided = torch.ops.aten.as_strided.default._handle
_empty_on_card = torch.ops.mluverify_native.empty_on.default
_empty_on_card0 = torch._C._acc.create_empty_tensor  # card 0 only, but 15x faster than a torch.ops call
_storage_from_pointer = torch._C._construct_storage_from_data_pointer
CARDS = torch.ops.mluverify_native.cards()
DEVICES = tuple(torch.device(DEVICE_TYPE, card) for card in range(CARDS))


class _Buffer:
    """The CPU memory behind one ``mlu`` storage, its card, and how often the device wrote it.

    ``serial`` is unique for the process lifetime (addresses and storage ids are reused).
    ``last_write`` / ``reads``: the queued tasks writing / reading it (see ``_hazards``).
    """

    __slots__ = ("cpu_storage", "nbytes", "generation", "serial", "card", "last_write", "reads")

    def __init__(self, cpu_storage: torch.UntypedStorage, nbytes: int, card: int) -> None:
        self.cpu_storage = cpu_storage
        self.nbytes = nbytes
        self.generation = 0
        self.serial = next(_serials)
        self.card = card
        self.last_write = None
        self.reads: list = []


@dataclass(frozen=True)
class MemoryStats:
    """Byte counts of one card's live ``mlu`` storages (the emulated device has no caching
    allocator, so reserved equals allocated)."""

    allocated: int
    max_allocated: int


_serials = itertools.count()
# Called with a buffer's serial number when its storage is freed (e.g. to drop caches).
release_listeners: list = []
_BUFFERS: dict[int, _Buffer] = {}
_BY_POINTER: dict[int, _Buffer] = {}
# Re-entrant: a storage freed by garbage collection inside a locked block releases its buffer there.
_lock = threading.RLock()
_allocated = [0] * CARDS  # bytes per card
_max_allocated = [0] * CARDS


def _release(key: int) -> None:
    with _lock:
        buffer = _BUFFERS.pop(key, None)
        if buffer is not None:
            _allocated[buffer.card] -= buffer.nbytes
            pointer = buffer.cpu_storage.data_ptr()
            if _BY_POINTER.get(pointer) is buffer:
                del _BY_POINTER[pointer]
    if buffer is not None:
        for listener in release_listeners:
            listener(buffer.serial)


def _adopt(cpu_storage: torch.UntypedStorage, card: int, nbytes: int | None = None) -> torch.UntypedStorage:
    """A new ``mlu`` storage on ``card`` over ``cpu_storage``'s bytes (the first ``nbytes`` of
    them), registered and accounted."""
    nbytes = cpu_storage.nbytes() if nbytes is None else nbytes
    device_storage = _storage_from_pointer(cpu_storage.data_ptr(), DEVICES[card], nbytes)
    key = device_storage._cdata
    with _lock:
        _BUFFERS[key] = _BY_POINTER[cpu_storage.data_ptr()] = _Buffer(cpu_storage, nbytes, card)
        _allocated[card] += nbytes
        _max_allocated[card] = max(_max_allocated[card], _allocated[card])
    # The storage's Python object lives exactly as long as the StorageImpl (torch preserves it),
    # so its finalizer runs when the last tensor or view on it is gone.
    weakref.finalize(device_storage, _release, key)
    return device_storage


def _on_storage(device_storage: torch.UntypedStorage, dtype: torch.dtype, size, stride, offset: int) -> torch.Tensor:
    card = device_storage.device.index
    tensor = _empty_on_card0([0], dtype) if card == 0 else _empty_on_card(card, dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, tensor, device_storage, offset, size, stride)
    return tensor


def check_card(device_index: int) -> int:
    """``device_index`` as a card index (-1: the current card); ValueError listing the valid ones."""
    if device_index == -1:
        return current_card()
    if isinstance(device_index, bool) or not isinstance(device_index, int) or not 0 <= device_index < CARDS:
        valid = ", ".join(str(i) for i in range(-1, CARDS))
        raise InvalidArgument(f"MLU card index {device_index!r} is out of range: this process has {CARDS} "
                              f"emulated card(s); valid: {valid} (-1: the current card); set "
                              f"MLUVERIFY_DEVICE_COUNT or [tool.mluverify] device_count for more")
    return device_index


def current_card() -> int:
    """The calling thread's current card (``set_device``; a Queue's card inside its block)."""
    return torch.accelerator.current_device_index()


def wrap_cpu(cpu: torch.Tensor, card: int | None = None) -> torch.Tensor:
    """An ``mlu`` tensor on ``card`` (default: the current card) over ``cpu``'s memory (same
    size, stride, offset), without a copy.

    The device takes the memory over: the caller must not write ``cpu`` afterwards.
    """
    if cpu.device.type != "cpu":
        raise ValueError(f"wrap_cpu expects a CPU tensor, got one on {cpu.device}")
    card = current_card() if card is None else check_card(card)
    storage = cpu.untyped_storage()
    if storage.nbytes() == 0:
        # A zero-byte storage may have a null data pointer; give it one byte of its own.
        device_storage = _adopt(torch.empty(1, dtype=torch.uint8).untyped_storage(), card, 0)
    else:
        device_storage = _adopt(storage, card)
    return _on_storage(device_storage, cpu.dtype, cpu.size(), cpu.stride(), cpu.storage_offset())


def empty_device(size, dtype: torch.dtype, stride=None, card: int | None = None) -> torch.Tensor:
    """A new uninitialised ``mlu`` tensor on ``card`` (contiguous unless ``stride`` is given)."""
    if stride is None:
        return wrap_cpu(torch.empty(size, dtype=dtype), card)
    return wrap_cpu(torch.empty_strided(size, stride, dtype=dtype), card)


def device_view(base: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """An ``mlu`` view of ``base``'s storage with the given geometry (C++ as_strided, no Python)."""
    return _as_strided.redispatch_boxed(_CPU_KEYS, base, size, stride, offset)


def buffer_by_storage(storage: torch.UntypedStorage) -> _Buffer:
    """The buffer behind an ``mlu`` storage; a clear error for anything else.

    Looked up by storage identity, else by data pointer: torch sometimes builds a second
    StorageImpl over the same memory (e.g. when serialising).
    """
    buffer = _BUFFERS.get(storage._cdata) or _BY_POINTER.get(storage.data_ptr())
    if buffer is None:
        raise ValueError(f"storage on {storage.device} has no mluverify device buffer (is it an 'mlu' tensor?)")
    return buffer


def buffer_of(t: torch.Tensor) -> _Buffer:
    """The buffer behind an ``mlu`` tensor; a clear error for anything else."""
    return buffer_by_storage(t.untyped_storage())


def as_cpu(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor aliasing ``t``'s device memory, with ``t``'s size, stride, offset and dtype,
    once no queued op reads or writes that memory any more.

    Writes through it change ``t``; call ``mark_written(t)`` after such a write so caches keyed
    by the storage (e.g. reduced-precision weights) see the change. Raises the failure of the
    queued op that should have produced ``t`` (``QueuedOpError``).
    """
    buffer = buffer_of(t)
    _hazards.settle_read((buffer,))
    _hazards.settle_write((buffer,))
    return alias(t, buffer)


def work_queued() -> bool:
    """Whether any queued op has not finished (or failed): until then, reading device memory
    must go through ``as_cpu`` or ``read_bytes``, which wait for it."""
    return _hazards.any_pending()


def read_bytes(t: torch.Tensor, nbytes: int) -> bytes:
    """A copy of the ``nbytes`` of ``t``'s device memory from its first element on, once no
    queued op writes that memory any more. For a few values (a dump's first ten) it is
    cheaper than ``as_cpu``, which builds a tensor. The caller keeps ``nbytes`` within ``t``'s
    memory (a contiguous ``t`` holds ``numel() * element_size()`` bytes there)."""
    if _hazards.any_pending():
        _hazards.settle_read((buffer_of(t),))
    return ctypes.string_at(t.data_ptr(), nbytes)


def alias(t: torch.Tensor, buffer: _Buffer | None = None) -> torch.Tensor:
    """``as_cpu`` without waiting: for code that has already ordered itself after the queued
    work (ops, and queued ops on their worker)."""
    cpu = torch.empty(0, dtype=t.dtype)
    return cpu.set_((buffer or buffer_of(t)).cpu_storage, t.storage_offset(), t.size(), t.stride())


def buffer_by_cpu_pointer(pointer: int) -> _Buffer | None:
    """The device buffer whose CPU memory starts at ``pointer`` (as seen by a kernel), if any."""
    return _BY_POINTER.get(pointer)


def buffer_version(cpu_alias: torch.Tensor) -> tuple[int, int] | None:
    """``(serial, write generation)`` of the device buffer a CPU alias (as a kernel receives it)
    views, or None for a plain CPU tensor. Serials are never reused: a cache keyed by the
    serial and the view's geometry, and checked against the generation, is never stale."""
    buffer = _BY_POINTER.get(cpu_alias.untyped_storage().data_ptr())
    return None if buffer is None else (buffer.serial, buffer.generation)


def mark_written(t: torch.Tensor) -> None:
    """Record that ``t``'s device memory changed (bumps its storage's generation)."""
    buffer_of(t).generation += 1


def generation(t: torch.Tensor) -> int:
    """How many times ``t``'s storage has been written by the device since allocation."""
    return buffer_of(t).generation


def resize_device(t: torch.Tensor, size, memory_format=None) -> torch.Tensor:
    """``resize_`` for an ``mlu`` tensor: keeps the data that fits, grows the storage if needed
    (after the queued work on the old storage is finished)."""
    needed = torch.empty(0, dtype=t.dtype).resize_(size, memory_format=memory_format)
    required = (t.storage_offset() + _span(needed)) * t.element_size()
    storage = t.untyped_storage()
    if required > storage.nbytes():
        grown = torch.empty(required, dtype=torch.uint8)
        buffer = buffer_of(t)
        _hazards.settle_write((buffer,))
        kept = min(buffer.cpu_storage.nbytes(), storage.nbytes())
        grown[:kept].copy_(torch.empty(0, dtype=torch.uint8).set_(buffer.cpu_storage, 0, (kept,), (1,)))
        storage = _adopt(grown.untyped_storage(), buffer.card)
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, t.storage_offset(), needed.size(), needed.stride())
    return t


def _span(t: torch.Tensor) -> int:
    """Elements between the first and one past the last element ``t`` can address."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))


def memory_stats(card: int) -> MemoryStats:
    return MemoryStats(_allocated[card], _max_allocated[card])


def reset_peak(card: int) -> None:
    with _lock:
        _max_allocated[card] = _allocated[card]
