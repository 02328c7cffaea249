"""What plugins add to the emulated MLU: the kernels in force, extra fusible ops, extra
quantization mappings.

The device holds them itself, one process-wide table beside the kernels, because the kernels
sit in torch's dispatcher, which is process-wide too. A run hands its plugin manager down
(``mluverify.device.use_plugins``); the device asks nothing from the layers above. The hooks
are declared in ``mluverify.device_hookspecs``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from mluverify.device import _dispatch, kernels
from mluverify.device.kernels import KernelRegistry
from mluverify.errors import PluginError

if TYPE_CHECKING:
    import pluggy


class _InstalledKernels(KernelRegistry):
    """The kernels in force, one dispatch slot per op. A registration takes effect at once."""

    def __init__(self) -> None:
        super().__init__()
        self._slots: dict[str, dict[str, kernels.Kernel]] = {}

    def register(self, op_name: str, fn: kernels.Kernel, mode: str = kernels.DEFAULT_MODE) -> None:
        super().register(op_name, fn, mode)
        name = kernels.canonical_op_name(op_name)
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
        return slot.get(kernels.active_mode()) or slot.get(kernels.DEFAULT_MODE)

    overload = kernels.resolve_overload(op_name)
    _dispatch.register_op_impl(op_name, _dispatch.make_kernel_impl(overload, select))
    return slot


@dataclass
class _PluginContributions:
    """What the plugins of the manager last handed to the device contributed."""

    plugins: pluggy.PluginManager | None = None  # the manager handed over; None: the device's own only
    fusible_ops: tuple[str, ...] = ()
    quant_mapping: dict[type, type] = field(default_factory=dict)


_installed = _InstalledKernels()
_contributions = _PluginContributions()


def install(plugins: pluggy.PluginManager | None, builtin_kernels: Callable[[KernelRegistry], None]) -> KernelRegistry:
    """Install ``builtin_kernels``, then what the plugins of ``plugins`` (a pluggy plugin
    manager, or None) contribute through the device hooks, each plugin in the order it
    registered: for the same op and mode, or the same float class, the later one wins."""
    _installed.clear()
    builtin_kernels(_installed)
    fusible: list[str] = []
    mapping: dict[type, type] = {}
    if plugins is not None:
        _answers(plugins, "mluverify_device_kernels", registry=_installed)
        fusible = [name for answer in _answers(plugins, "mluverify_fusible_ops") for name in answer]
        for answer in _answers(plugins, "mluverify_quant_mapping"):
            mapping.update(answer)
    _contributions.plugins, _contributions.fusible_ops = plugins, tuple(fusible)
    _contributions.quant_mapping = mapping
    return _installed


def _answers(plugins: pluggy.PluginManager, name: str, **kwargs: Any) -> list[Any]:
    """Call hook ``name`` of every plugin in registration order (pluggy calls the latest
    first); the non-None answers. A plugin that raises is a PluginError naming it."""
    hook = getattr(plugins.hook, name, None)
    answers = []
    for impl in hook.get_hookimpls() if hook is not None else ():
        try:
            answer = impl.function(*[kwargs[arg] for arg in impl.argnames])
        except Exception as exc:
            raise PluginError(f"plugin {impl.plugin_name!r} raised in hook {name}: "
                              f"{type(exc).__name__}: {exc}") from exc
        if answer is not None:
            answers.append(answer)
    return answers


def handed_plugins() -> pluggy.PluginManager | None:
    """The plugin manager last handed to the device, or None."""
    return _contributions.plugins


def kernel_registry() -> KernelRegistry:
    """The registry of the kernels in force (e.g. to call a kernel directly on CPU tensors)."""
    return _installed


def plugin_fusible_ops() -> tuple[str, ...]:
    """The fusible ops the plugins add (``mluverify_fusible_ops``)."""
    return _contributions.fusible_ops


def plugin_quant_mapping() -> dict[type, type]:
    """The float -> quantized classes the plugins add (``mluverify_quant_mapping``)."""
    return dict(_contributions.quant_mapping)
