"""Built-in plugin: the bridge between a run and the emulated MLU.

Adds the device's hook specifications (``mluverify.device_hookspecs``) to the run's plugin
manager, so plugins implementing them validate (it loads before every other plugin). When a
registered plugin implements a device hook it hands the run's plugin manager to the device
(``mluverify.device.use_plugins``): at configure, and again when such a plugin registers later
(a conftest.py found while collecting). At unconfigure it gives the device back what it had
before (its own kernels, or an enclosing run's plugins when runs nest in one process), so the
next run in the process starts clean. A run without such a plugin never imports the
device (nor torch) from here.
"""
from __future__ import annotations

import sys
from typing import Any

import pluggy

from mluverify import device_hookspecs
from mluverify.core.hookspecs import hookimpl

DEVICE_HOOKS: tuple[str, ...] = tuple(name for name in vars(device_hookspecs) if name.startswith("mluverify_"))
HANDOFF = "mluverify-device-handoff"


@hookimpl
def mluverify_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(device_hookspecs)


@hookimpl
def mluverify_configure(pluginmanager: pluggy.PluginManager) -> None:
    handoff = _DeviceHandoff(pluginmanager)
    pluginmanager.register(handoff, name=HANDOFF)
    if any(_implements_device_hook(plugin) for plugin in pluginmanager.get_plugins()):
        handoff.hand_over()


@hookimpl
def mluverify_unconfigure(pluginmanager: pluggy.PluginManager) -> None:
    handoff = pluginmanager.unregister(name=HANDOFF)
    if handoff is not None:
        handoff.give_back()


class _DeviceHandoff:
    """One run's link to the device: hands the run's plugin manager over when a plugin that
    implements a device hook registers after the run was configured."""

    def __init__(self, pluginmanager: pluggy.PluginManager) -> None:
        self.pluginmanager = pluginmanager
        self.handed = False
        self.previous: pluggy.PluginManager | None = None  # what the device had before this run

    @hookimpl
    def mluverify_plugin_registered(self, plugin: Any) -> None:
        if _implements_device_hook(plugin):
            self.hand_over()

    def hand_over(self) -> None:
        import mluverify.device

        if not self.handed:
            self.previous, self.handed = mluverify.device.extensions.handed_plugins(), True
        mluverify.device.use_plugins(self.pluginmanager)

    def give_back(self) -> None:
        if self.handed:
            sys.modules["mluverify.device"].use_plugins(self.previous)
            self.handed = False


def _implements_device_hook(plugin: Any) -> bool:
    return any(callable(getattr(plugin, name, None)) for name in DEVICE_HOOKS)
