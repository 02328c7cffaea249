"""Device memory of the emulated MLU: CPU buffers behind ``mlu`` storages.

An ``mlu`` tensor's storage is a real torch ``StorageImpl`` on device ``mlu:0`` whose data
pointer is the address of a CPU buffer owned here (torch gives a Python back end no allocator,
so the storage is built from a data pointer and does not own it). The buffer lives in
``_BUFFERS`` keyed by the storage's identity and is dropped by a finalizer when torch frees
the storage, so views made by C++ view kernels (which share the storage without calling
Python) always find their data, and the memory statistics count live storages exactly.

``as_cpu(t)`` is a CPU tensor aliasing ``t``'s bytes (same size, stride, offset, dtype);
``wrap_cpu(c)`` adopts a CPU tensor's memory as a new ``mlu`` tensor without copying.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass

import torch

from mluverify.device._backend import DEVICE_TYPE
DEVICE = torch.device(DEVICE_TYPE, 0)
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle
_as_strided = torch.ops.aten.as_strided.default._handle
_new_device_tensor = torch._C._acc.create_empty_tensor
_storage_from_pointer = torch._C._construct_storage_from_data_pointer


class _Buffer:
    """The CPU memory behind one ``mlu`` storage, and how often the device wrote it.

    ``serial`` is unique for the process lifetime (addresses and storage ids are reused).
    """

    __slots__ = ("cpu_storage", "nbytes", "generation", "serial")

    def __init__(self, cpu_storage: torch.UntypedStorage, nbytes: int) -> None:
        self.cpu_storage = cpu_storage
        self.nbytes = nbytes
        self.generation = 0
        self.serial = next(_serials)


@dataclass(frozen=True)
class MemoryStats:
    """Byte counts of live ``mlu`` storages (the emulated device has no caching allocator,
    so reserved equals allocated)."""

    allocated: int
    max_allocated: int


_serials = itertools.count()
# Called with a buffer's serial number when its storage is freed (e.g. to drop caches).
release_listeners: list = []
_BUFFERS: dict[int, _Buffer] = {}
_BY_POINTER: dict[int, _Buffer] = {}
_lock = threading.Lock()
_allocated = 0
_max_allocated = 0


def _release(key: int) -> None:
    global _allocated
    with _lock:
        buffer = _BUFFERS.pop(key, None)
        if buffer is not None:
            _allocated -= buffer.nbytes
            pointer = buffer.cpu_storage.data_ptr()
            if _BY_POINTER.get(pointer) is buffer:
                del _BY_POINTER[pointer]
    if buffer is not None:
        for listener in release_listeners:
            listener(buffer.serial)


def _adopt(cpu_storage: torch.UntypedStorage, nbytes: int | None = None) -> torch.UntypedStorage:
    """A new ``mlu`` storage over ``cpu_storage``'s bytes (the first ``nbytes`` of them),
    registered and accounted."""
    global _allocated, _max_allocated
    nbytes = cpu_storage.nbytes() if nbytes is None else nbytes
    device_storage = _storage_from_pointer(cpu_storage.data_ptr(), DEVICE, nbytes)
    key = device_storage._cdata
    with _lock:
        _BUFFERS[key] = _BY_POINTER[cpu_storage.data_ptr()] = _Buffer(cpu_storage, nbytes)
        _allocated += nbytes
        _max_allocated = max(_max_allocated, _allocated)
    # The storage's Python object lives exactly as long as the StorageImpl (torch preserves it),
    # so its finalizer runs when the last tensor or view on it is gone.
    weakref.finalize(device_storage, _release, key)
    return device_storage


def _on_storage(device_storage: torch.UntypedStorage, dtype: torch.dtype, size, stride, offset: int) -> torch.Tensor:
    tensor = _new_device_tensor([0], dtype)
    _set_storage.redispatch_boxed(_CPU_KEYS, tensor, device_storage, offset, size, stride)
    return tensor


def wrap_cpu(cpu: torch.Tensor) -> torch.Tensor:
    """An ``mlu`` tensor over ``cpu``'s memory (same size, stride, offset), without a copy.

    The device takes the memory over: the caller must not write ``cpu`` afterwards.
    """
    if cpu.device.type != "cpu":
        raise ValueError(f"wrap_cpu expects a CPU tensor, got one on {cpu.device}")
    storage = cpu.untyped_storage()
    if storage.nbytes() == 0:
        # A zero-byte storage may have a null data pointer; give it one byte of its own.
        device_storage = _adopt(torch.empty(1, dtype=torch.uint8).untyped_storage(), 0)
    else:
        device_storage = _adopt(storage)
    return _on_storage(device_storage, cpu.dtype, cpu.size(), cpu.stride(), cpu.storage_offset())


def empty_device(size, dtype: torch.dtype, stride=None) -> torch.Tensor:
    """A new uninitialised ``mlu`` tensor (contiguous unless ``stride`` is given)."""
    if stride is None:
        return wrap_cpu(torch.empty(size, dtype=dtype))
    return wrap_cpu(torch.empty_strided(size, stride, dtype=dtype))


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
    """A CPU tensor aliasing ``t``'s device memory, with ``t``'s size, stride, offset and dtype.

    Writes through it change ``t``; call ``mark_written(t)`` after such a write so caches keyed
    by the storage (e.g. reduced-precision weights) see the change.
    """
    cpu = torch.empty(0, dtype=t.dtype)
    return cpu.set_(buffer_of(t).cpu_storage, t.storage_offset(), t.size(), t.stride())


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
    """``resize_`` for an ``mlu`` tensor: keeps the data that fits, grows the storage if needed."""
    needed = torch.empty(0, dtype=t.dtype).resize_(size, memory_format=memory_format)
    required = (t.storage_offset() + _span(needed)) * t.element_size()
    storage = t.untyped_storage()
    if required > storage.nbytes():
        grown = torch.empty(required, dtype=torch.uint8)
        old = buffer_of(t).cpu_storage
        kept = min(old.nbytes(), storage.nbytes())
        grown[:kept].copy_(torch.empty(0, dtype=torch.uint8).set_(old, 0, (kept,), (1,)))
        storage = _adopt(grown.untyped_storage())
    _set_storage.redispatch_boxed(_CPU_KEYS, t, storage, t.storage_offset(), needed.size(), needed.stride())
    return t


def _span(t: torch.Tensor) -> int:
    """Elements between the first and one past the last element ``t`` can address."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))


def memory_stats() -> MemoryStats:
    return MemoryStats(_allocated, _max_allocated)


def reset_peak() -> None:
    global _max_allocated
    with _lock:
        _max_allocated = _allocated
