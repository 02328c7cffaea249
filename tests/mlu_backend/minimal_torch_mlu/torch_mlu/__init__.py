"""A minimal stand-in for Cambricon's ``torch_mlu``, for the back-end selection test.

Like the real package, importing it registers torch device ``mlu``; its memory is host memory
and it has kernels for copies and ``add`` only. Not a mluverify module: it imports nothing
from mluverify.
"""
import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend


class _DeviceModule:
    is_available = staticmethod(lambda: True)
    is_initialized = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 1)
    current_device = staticmethod(lambda: 0)
    _is_in_bad_fork = staticmethod(lambda: False)
    manual_seed_all = staticmethod(lambda seed: None)


_setup_privateuseone_for_python_backend("mlu", backend_module=_DeviceModule())
_DEVICE = torch.device("mlu", 0)
_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_HOST = {}  # device storage -> the CPU storage holding its bytes (kept alive here)


def _wrap(cpu):
    storage = torch._C._construct_storage_from_data_pointer(cpu.data_ptr(), _DEVICE, cpu.untyped_storage().nbytes())
    _HOST[storage._cdata] = cpu.untyped_storage()
    tensor = torch._C._acc.create_empty_tensor([0], cpu.dtype)
    torch.ops.aten.set_.source_Storage_storage_offset._handle.redispatch_boxed(
        _CPU_KEYS, tensor, storage, cpu.storage_offset(), cpu.size(), cpu.stride())
    return tensor


def _host(tensor):
    if tensor.device.type != "mlu":
        return tensor
    storage = _HOST[tensor.untyped_storage()._cdata]
    return torch.empty(0, dtype=tensor.dtype).set_(storage, tensor.storage_offset(), tensor.size(), tensor.stride())


def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _wrap(torch.empty(size, dtype=dtype or torch.float32))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return _wrap(torch.empty_strided(size, stride, dtype=dtype or torch.float32))


def _copy_from(src, dst, non_blocking=False):
    _host(dst).copy_(_host(src))
    return dst


def _add(a, b, alpha=1):
    return _wrap(torch.add(_host(a), _host(b), alpha=alpha))


_LIBRARY = torch.library.Library("aten", "IMPL")
for _name, _kernel in (("empty.memory_format", _empty), ("empty_strided", _empty_strided),
                       ("_copy_from", _copy_from), ("add.Tensor", _add)):
    _LIBRARY.impl(_name, _kernel, "PrivateUse1")
