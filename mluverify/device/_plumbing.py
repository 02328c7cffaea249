"""The device's own memory ops: allocation, copies, views, ``resize_``/``set_``, ``item``.

These are the device, not computation, so they are never counted as CPU fallbacks. View ops
reuse torch's device-agnostic C++ view kernels (they only touch sizes, strides and the
storage), reached by redispatching to the CPU key.
"""
from __future__ import annotations

import torch

from mluverify.device import _storage
from mluverify.device._dispatch import register_op_impl
from mluverify.device._storage import DEVICE_TYPE, as_cpu, buffer_of, empty_device, resize_device

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)

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


def _empty_memory_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = dtype or torch.get_default_dtype()
    cpu = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
    return _storage.wrap_cpu(cpu)


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return empty_device(size, dtype or torch.get_default_dtype(), stride)


def _cpu_side(t: torch.Tensor) -> torch.Tensor:
    return as_cpu(t) if t.device.type == DEVICE_TYPE else t


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    _cpu_side(dst).copy_(_cpu_side(src))
    if dst.device.type == DEVICE_TYPE:
        buffer_of(dst).generation += 1
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
    register_op_impl("resize_", _resize)
    register_op_impl("_local_scalar_dense", _local_scalar_dense)
