"""The emulated Cambricon MLU: torch device ``mlu`` (PrivateUse1, Python back end).

``import mluverify.device`` registers the device (once per process), its memory plumbing, the
CPU fallback and the kernels every plugin contributes through ``mluverify_device_kernels``.
Data lives in CPU buffers (``as_cpu`` / ``wrap_cpu``); kernels follow the numerics profile of
the core version (``numerics``, ``mlu_model.set_core_version``).
"""
from __future__ import annotations

from mluverify.device import _backend  # noqa: F401  (registers the device first)
from mluverify.device import _cells, _dispatch, _log, _plumbing, _serialization
from mluverify.device._fallback import (
    FallbackTracker, NotDeclaredError, fallback_counts, fallback_rule, set_fallback_rule, track_fallbacks)
from mluverify.device._storage import (
    DEVICE_TYPE, as_cpu, buffer_version, generation, mark_written, read_bytes, work_queued, wrap_cpu)
from mluverify.device import kernels as _kernels
from mluverify.device.kernels import KernelRegistry, active_mode, kernel_mode, set_default_mode
from mluverify.device.numerics import NumericsProfile, active_profile, set_core_version

__all__ = [
    "DEVICE_TYPE", "FallbackTracker", "KernelRegistry", "NumericsProfile", "active_mode",
    "active_profile", "as_cpu", "buffer_version", "fallback_counts", "generation", "kernel_mode", "kernel_registry",
    "mark_written", "read_bytes", "reload_kernels", "set_core_version", "set_default_mode", "track_fallbacks", "work_queued", "wrap_cpu",
    "fuse", "fusion_summary", "NotDeclaredError", "fallback_rule", "set_fallback_rule",
]


class _InstalledKernels(KernelRegistry):
    """The kernels in force, one dispatch slot per op. A registration takes effect at once, so
    a kernel plugin registered after the device loaded (``-p``, a conftest.py) overrides
    through the historic ``mluverify_device_kernels`` hook alone."""

    def __init__(self) -> None:
        super().__init__()
        self._slots: dict[str, dict[str, _kernels.Kernel]] = {}

    def register(self, op_name: str, fn: _kernels.Kernel, mode: str = _kernels.DEFAULT_MODE) -> None:
        super().register(op_name, fn, mode)
        name = _kernels.canonical_op_name(op_name)
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = _dispatch_slot(name)
        slot[mode] = fn

    def clear(self) -> None:
        self._kernels.clear()
        for slot in self._slots.values():
            slot.clear()


def _dispatch_slot(op_name: str) -> dict:
    """Route ``op_name`` on ``mlu`` to the slot's kernel of the active mode (else ``cnnl``); torch
    keeps the registration for the life of the process, the slot's contents may change."""
    slot: dict = {}

    def select():
        return slot.get(_kernels.active_mode()) or slot.get(_kernels.DEFAULT_MODE)

    overload = _kernels.resolve_overload(op_name)
    _dispatch.register_op_impl(op_name, _dispatch.make_kernel_impl(overload, select))
    return slot


_installed = _InstalledKernels()


def reload_kernels() -> KernelRegistry:
    """Ask every plugin for its kernels again (``mluverify_device_kernels``) and install only
    those: after a kernel plugin is unregistered. A plugin registered later needs no reload."""
    from mluverify.core.plugin_manager import call_hook, get_plugin_manager

    _installed.clear()
    call_hook(get_plugin_manager(), "mluverify_device_kernels", registry=_installed)
    return _installed


def kernel_registry() -> KernelRegistry:
    """The registry of the kernels in force (e.g. to call a kernel directly on CPU tensors)."""
    return _installed


def _setup() -> None:
    _log.apply_log_level()
    _plumbing.register()
    _dispatch.install_fallback()
    _serialization.register()
    _cells.register()
    reload_kernels()


_setup()

# Fused execution (docs/fusion.md): from here on, a torch.jit module called on mlu runs fused.
from mluverify.device.fusion import fuse, fusion_summary  # noqa: E402
