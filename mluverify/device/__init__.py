"""The emulated Cambricon MLU: torch device ``mlu`` (PrivateUse1, Python back end).

``import mluverify.device`` registers the device (once per process), its memory plumbing, the
CPU fallback and its built-in kernels; it asks no plugin manager. A run that has plugins
implementing the device hooks hands its plugin manager over with ``use_plugins``.
Data lives in CPU buffers (``as_cpu`` / ``wrap_cpu``); kernels follow the numerics profile of
the core version (``numerics``, ``mlu_model.set_core_version``).
"""
from __future__ import annotations

import typing

from mluverify.device import _backend  # noqa: F401  (registers the device first)
from mluverify.device import (  # noqa: F401
    _cells, _device_module, _dispatch, _host_memory, _log, _plumbing, _serialization)
from mluverify.device._fallback import (
    FallbackTracker, NotDeclaredError, fallback_counts, fallback_rule, set_fallback_rule, track_fallbacks)
from mluverify.device._storage import (
    DEVICE_TYPE, as_cpu, buffer_version, generation, mark_written, read_bytes, work_queued, wrap_cpu)
from mluverify.device import builtin_kernels, extensions
from mluverify.device.extensions import kernel_registry
from mluverify.device.kernels import KernelRegistry, active_mode, kernel_mode, set_default_mode
from mluverify.device.numerics import NumericsProfile, active_profile, set_core_version

if typing.TYPE_CHECKING:
    import pluggy

__all__ = [
    "DEVICE_TYPE", "FallbackTracker", "KernelRegistry", "NumericsProfile", "active_mode",
    "active_profile", "as_cpu", "buffer_version", "fallback_counts", "generation", "kernel_mode", "kernel_registry",
    "mark_written", "read_bytes", "reload_kernels", "set_core_version", "set_default_mode", "track_fallbacks", "use_plugins", "work_queued", "wrap_cpu",
    "fuse", "fusion_summary", "NotDeclaredError", "fallback_rule", "set_fallback_rule",
]


def use_plugins(plugins: pluggy.PluginManager | None) -> KernelRegistry:
    """Install the device's own kernels, fusible ops and quantization mapping, then what the
    plugins of ``plugins`` (a run's pluggy plugin manager) add through the device hooks
    (``mluverify.device_hookspecs``; a plugin's kernel wins over the built-in one). ``None``:
    back to the device's own. Returns the kernels in force."""
    return extensions.install(plugins, builtin_kernels.register)


def reload_kernels() -> KernelRegistry:
    """Ask the plugins last handed to the device (``use_plugins``) again: after one of them
    was unregistered from their plugin manager."""
    return use_plugins(extensions.handed_plugins())


def _setup() -> None:
    _host_memory.keep_freed_memory()
    _log.apply_log_level()
    _plumbing.register()
    _dispatch.install_fallback()
    _serialization.register()
    _cells.register()
    use_plugins(None)


_setup()

# Fused execution (docs/fusion.md): from here on, a torch.jit module called on mlu runs fused.
from mluverify.device.fusion import fuse, fusion_summary  # noqa: E402
