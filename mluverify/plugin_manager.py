"""The pluggy plugin manager shared by the pytest plugin, the CLI and the emulated device."""
from __future__ import annotations

import functools
import importlib
import sys
from typing import Any, Iterable

import pluggy

from mluverify import hookspecs
from mluverify.errors import PluginError

# Built-in behaviour, one concern per module, loaded exactly like third-party plugins.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "mluverify.plugins.torch_devices",
    "mluverify.plugins.mlu_backend",
    "mluverify.plugins.mlu_backward_kernels",
    "mluverify.plugins.mlu_cnnl_kernels",
    "mluverify.plugins.mlu_fusion",
    "mluverify.plugins.mlu_quant",
    "mluverify.plugins.report_writers",
    "mluverify.plugins.opinfo_cases",
    "mluverify.plugins.captured_cases",
)


def new_plugin_manager(extra: Iterable[Any] = (), *, entry_points: bool = True) -> pluggy.PluginManager:
    """Build a plugin manager with the built-ins, entry-point plugins and ``extra`` plugins.

    ``extra`` holds module names or plugin objects (e.g. from ``-p`` under pytest).
    Unknown hooks in any plugin raise PluginError naming the plugin.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if entry_points:
        pm.load_setuptools_entrypoints(hookspecs.PROJECT)
    for plugin in extra:
        register(pm, plugin)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r} defines an unknown hook: {exc}") from None
    return pm


def register(pm: pluggy.PluginManager, plugin: Any) -> None:
    """Register a plugin object or importable module name, once."""
    if isinstance(plugin, str):
        if pm.get_plugin(plugin) is not None:
            return
        try:
            plugin_object, name = importlib.import_module(plugin), plugin
        except ImportError as exc:
            raise PluginError(f"cannot import mluverify plugin {plugin!r}: {exc}") from exc
    else:
        if pm.is_registered(plugin):
            return
        plugin_object, name = plugin, None
    pm.register(plugin_object, name=name)
    _reload_device_kernels(pm, plugin_object)


def _reload_device_kernels(pm: pluggy.PluginManager, plugin: Any) -> None:
    """A kernel plugin registered after the emulated device loaded its kernels (``-p plugin``,
    a conftest.py) makes the device load them again, so its overrides take effect."""
    device = sys.modules.get("mluverify.device")
    if device is not None and hasattr(plugin, "mluverify_device_kernels") and pm is get_plugin_manager():
        device.reload_kernels()


@functools.lru_cache(maxsize=1)
def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager (built-ins and entry points), built on first use."""
    return new_plugin_manager()


def call_hook(pm: pluggy.PluginManager, name: str, **kwargs: Any) -> Any:
    """Call hook ``name``; a plugin that raises becomes a PluginError naming plugin and hook."""
    hook = getattr(pm.hook, name)
    try:
        return hook(**kwargs)
    except Exception as exc:
        culprit = _culprit(pm, exc)
        raise PluginError(f"plugin {culprit} raised in hook {name}: {type(exc).__name__}: {exc}") from exc


def _culprit(pm: pluggy.PluginManager, exc: Exception) -> str:
    """Name the plugin whose code raised ``exc``: the innermost plugin module in the traceback."""
    plugin_modules = {getattr(p, "__name__", None) for p in pm.get_plugins()}
    found = "<unknown>"
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__")
        if module in plugin_modules:
            found = f"{module!r} ({tb.tb_frame.f_code.co_filename})"
        tb = tb.tb_next
    return found
