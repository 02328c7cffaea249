"""The device's own memory ops: allocation, copies, views, ``resize_``/``set_``, ``item``.

These are the device, not computation, so they are never counted as CPU fallbacks. View ops
reuse torch's device-agnostic C++ view kernels (they only touch sizes, strides and the
storage), reached by redispatching to the CPU key. Allocations go to the card the ``device``
argument names (no index: the current card).

Copies run at once, after the queued work they read or overwrite, except inside
``with Queue(i):`` for a copy between cards or a ``non_blocking`` copy from or to pinned host
memory: those are queued, as on CUDA (a ``non_blocking`` copy to the host is complete only
after the queue is synchronised).
"""
from __future__ import annotations

import torch

from mluverify.device import _hazards, _storage, queues
from mluverify.device._dispatch import register_op_impl
from mluverify.device._storage import DEVICE_TYPE, alias, as_cpu, buffer_of, empty_device, resize_device

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_view_bits = torch.library.Library("aten", "IMPL")

# Ops that only re-point sizes, strides and storage (views, set_): torch has no generic kernel
# for them, and their CPU kernels are device-agnostic C++.
_GEOMETRY_OPS = (
    "as_strided",
    "view",
    "_reshape_alias",
    "unfold",
    "view_as_real",
    "view_as_complex",
    "set_.source_Storage",
    "set_.source_Storage_storage_offset",
    "set_.source_Tensor",
)


def _cpu_kernel_impl(op: torch._ops.OpOverload):
    handle = op._handle

    def impl(*args, **kwargs):
        return handle.redispatch_boxed(_CPU_KEYS, *args, **kwargs)

    return impl


def _card(device: torch.device | None) -> int | None:
    return None if device is None else device.index


def _empty_memory_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = dtype or torch.get_default_dtype()
    cpu = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
    return _storage.wrap_cpu(cpu, _card(device))


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return empty_device(size, dtype or torch.get_default_dtype(), stride, _card(device))


def _buffers(*tensors: torch.Tensor) -> list:
    return [buffer_of(t) for t in tensors if t.device.type == DEVICE_TYPE]


def _copy_queue(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool) -> queues.Queue | None:
    """The queue this copy goes on, if it is queued (see the module docstring)."""
    on_device = [t for t in (dst, src) if t.device.type == DEVICE_TYPE]
    host = [t for t in (dst, src) if t.device.type == "cpu"]
    if not (len(on_device) == 2 or (non_blocking and host and host[0].is_pinned())):
        return None
    return queues.queue_in_effect(on_device[0].device.index)


def _host_side(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a CPU tensor: the alias of a device tensor, with its conjugate / negative view bits
    (an alias is built from the storage and has none), so that CPU ``copy_`` resolves them."""
    if t.device.type != DEVICE_TYPE:
        return t
    host = alias(t)
    if t.is_conj():
        host = host.conj()
    return host._neg_view() if t.is_neg() else host


def _copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copy through CPU aliases (the caller has ordered itself after the work on them)."""
    _host_side(dst).copy_(_host_side(src))
    if dst.device.type == DEVICE_TYPE:
        buffer_of(dst).generation += 1


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    reads, writes = _buffers(src), _buffers(dst)
    queue = _copy_queue(src, dst, non_blocking)
    if queue is not None:
        # The geometry is taken now, as a queued op's arguments are.
        frozen = [t.as_strided(t.size(), t.stride(), t.storage_offset()) for t in (src, dst)]
        queue.submit("aten::_copy_from", lambda: _copy(*frozen), reads, writes)
        return dst
    _hazards.settle_read(reads)
    _hazards.settle_write(writes)
    _copy(src, dst)
    return dst


def _copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    if dst.device.type == DEVICE_TYPE:
        resize_device(dst, src.size())
    else:
        dst.resize_(src.size())
    return _copy_from(src, dst)


def _resize(self: torch.Tensor, size, *, memory_format=None) -> torch.Tensor:
    return resize_device(self, size, memory_format)


def _local_scalar_dense(self: torch.Tensor):
    return as_cpu(self).item()


def register() -> None:
    for name in _GEOMETRY_OPS:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        register_op_impl(name, _cpu_kernel_impl(op))
    register_op_impl("empty.memory_format", _empty_memory_format)
    register_op_impl("empty_strided", _empty_strided)
    register_op_impl("_copy_from", _copy_from)
    register_op_impl("_copy_from_and_resize", _copy_from_and_resize)
    # torch's conjugate / negative-view fallback would resolve a view bit of _copy_from's source by
    # cloning it, which copies through _copy_from again: a C++ recursion that ends in SIGSEGV
    # (``x.conj().cpu()``). The copies take the bits themselves instead (``_host_side``).
    for key in ("Conjugate", "Negative"):
        for name in ("_copy_from", "_copy_from_and_resize"):
            _view_bits.impl(name, torch.library.fallthrough_kernel, key)
    register_op_impl("resize_", _resize)
    register_op_impl("_local_scalar_dense", _local_scalar_dense)
