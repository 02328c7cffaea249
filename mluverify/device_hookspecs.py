"""The emulated MLU's extension points: its kernels, its fusible ops, its quantization mapping.

The device declares these hooks itself; the built-in plugin ``mluverify.plugins.mlu_device``
adds them to a run's plugin manager (``mluverify_addhooks``) and hands the manager to the
device (``mluverify.device.use_plugins``) when a plugin implements one. The device never asks
a plugin manager for them. This module sits beside ``mluverify.device``, not in it, because
importing anything under ``mluverify.device`` registers the device and imports torch, and a
plugin manager is built (and its plugins checked) in processes that never use the device.
Hooks are always called with keyword arguments.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import pluggy

if TYPE_CHECKING:
    from mluverify.device.kernels import KernelRegistry

hookspec = pluggy.HookspecMarker("mluverify")


@hookspec
def mluverify_device_kernels(registry: KernelRegistry) -> None:
    """Add or override emulated-MLU kernels, by ATen op name and execution mode.

    Called when a run hands its plugin manager to the device, and again when a plugin that
    implements a device hook registers later (a conftest.py that pytest finds while
    collecting). Plugins are called in the order they registered and the last registration of
    an op and mode wins, so every plugin's kernel overrides the device's built-in one.

    :param registry: call ``registry.register("aten::add.Tensor", fn, mode="cnnl")``.
    """


@hookspec
def mluverify_fusible_ops() -> Iterable[str]:
    """Return ATen op names (``"aten::convolution"``) that may join a fusion group.

    Added to the device's own fusible set; the union less ``DEBUG_FORCED_FALLBACK_OPS`` is the
    fusible set.
    """


@hookspec
def mluverify_quant_mapping() -> Mapping[type, type]:
    """Return a mapping float module class -> quantized module class.

    Merged over the device's default mapping (plugins registered later win for the same class);
    used by ``quantize_dynamic_mlu`` when ``mapping`` is not given. Exact types are matched: a
    subclass of ``nn.Conv2d`` is not quantized.
    """
