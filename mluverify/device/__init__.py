"""The emulated Cambricon MLU: torch device ``mlu`` (PrivateUse1, Python back end).

``import mluverify.device`` registers the device (once per process), its memory plumbing, the
CPU fallback and the kernels every plugin contributes through ``mluverify_device_kernels``.
Data lives in CPU buffers (``as_cpu`` / ``wrap_cpu``); kernels follow the numerics profile of
the core version (``numerics``, ``mlu_model.set_core_version``).
"""
from __future__ import annotations

from mluverify.device import _backend  # noqa: F401  (registers the device first)
from mluverify.device import _dispatch, _log, _plumbing, _serialization
from mluverify.device._fallback import FallbackTracker, fallback_counts, track_fallbacks
from mluverify.device._storage import DEVICE_TYPE, as_cpu, buffer_version, generation, mark_written, wrap_cpu
from mluverify.device import kernels as _kernels
from mluverify.device.kernels import KernelRegistry, active_mode, kernel_mode
from mluverify.device.numerics import NumericsProfile, active_profile, set_core_version

__all__ = [
    "DEVICE_TYPE", "FallbackTracker", "KernelRegistry", "NumericsProfile", "active_mode",
    "active_profile", "as_cpu", "buffer_version", "fallback_counts", "generation", "kernel_mode", "kernel_registry",
    "mark_written", "reload_kernels", "set_core_version", "track_fallbacks", "wrap_cpu",
    "fuse", "fusion_summary",
]


class _KernelTable:
    """The kernels in force: the registry from the last hook call, one dispatch slot per op."""

    registry = KernelRegistry()
    slots: dict[str, dict[str, object]] = {}


def _register_slot(op_name: str) -> dict:
    slot: dict = {}
    _KernelTable.slots[op_name] = slot

    def select():
        return slot.get(_kernels._ModeState.current) or slot.get(_kernels.DEFAULT_MODE)

    overload = _kernels.resolve_overload(op_name)
    _dispatch.register_op_impl(op_name, _dispatch.make_kernel_impl(overload, select))
    return slot


def reload_kernels() -> KernelRegistry:
    """Ask every plugin for its kernels again (``mluverify_device_kernels``) and install them."""
    from mluverify.plugin_manager import call_hook, get_plugin_manager

    registry = KernelRegistry()
    call_hook(get_plugin_manager(), "mluverify_device_kernels", registry=registry)
    for slot in _KernelTable.slots.values():
        slot.clear()
    for op_name in registry.op_names():
        slot = _KernelTable.slots.get(op_name) or _register_slot(op_name)
        slot.update(registry.by_mode(op_name))
    _KernelTable.registry = registry
    return registry


def kernel_registry() -> KernelRegistry:
    """The registry of the kernels in force (e.g. to call a kernel directly on CPU tensors)."""
    return _KernelTable.registry


def _setup() -> None:
    _log.apply_log_level()
    _plumbing.register()
    _dispatch.install_fallback()
    _serialization.register()
    reload_kernels()


_setup()

# Fused execution (docs/fusion.md): from here on, a torch.jit module called on mlu runs fused.
from mluverify.device.fusion import fuse, fusion_summary  # noqa: E402
