"""The seeds' flow: a ``torch.jit`` module moved to ``mlu`` and called on device inputs runs fused.

``torch.jit.ScriptModule`` and ``TopLevelTracedModule`` look ``forward`` up through a class-level
descriptor; ``install()`` wraps it so a call whose inputs are on the device goes through the
module's ``FusionRuntime`` (stored on the module). Other calls, and every other use of
``module.forward`` (``.graph``, ``.code``, ...), reach the TorchScript method unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from mluverify.device.fusion import _device

if TYPE_CHECKING:
    from mluverify.device.fusion.runtime import FusionRuntime

_PATCHED = (torch.jit.ScriptModule, torch.jit._trace.TopLevelTracedModule)
# Where a module fused in place (a torch.jit module called on the device) keeps its runtime.
RUNTIME_ATTRIBUTE = "_mlu_fusion_runtime"


class _FusingMethod:
    """A bound TorchScript ``forward`` that runs fused when called with device inputs."""

    def __init__(self, module: torch.jit.ScriptModule, method: Any) -> None:
        self._module = module
        self._method = method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or not any(_device.on_device(a) for a in args):
            return self._method(*args, **kwargs)
        return runtime_of(self._module, self._method)(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._method, name)


class _FusingForward:
    """Class-level ``forward`` descriptor wrapping TorchScript's own.

    A data descriptor (it has ``__set__``) on purpose: TorchScript caches the method in the
    instance ``__dict__``, which would otherwise hide a plain descriptor after the first call.
    """

    def __init__(self, original: Any) -> None:
        self.original = original

    def __get__(self, module: Any, owner: type | None = None) -> Any:
        if module is None:
            return self
        # Ask the compiled module directly: TorchScript's own descriptor works by raising
        # AttributeError, and a traced module forwards the lookup to an inner script module.
        method = module.__dict__.get("forward") or module._c._get_method("forward")
        return _FusingMethod(module, method)

    def __set__(self, module: Any, value: Any) -> None:
        module.__dict__["forward"] = value


def runtime_of(module: torch.jit.ScriptModule, method: Any = None) -> FusionRuntime | None:
    """The module's fusion runtime; created (running ``method`` layer by layer) when given."""
    runtime = getattr(module, RUNTIME_ATTRIBUTE, None)
    if runtime is None and method is not None:
        from mluverify.device.fusion.runtime import FusionRuntime  # the compiler, on first use

        runtime = FusionRuntime(module, method)
        setattr(module, RUNTIME_ATTRIBUTE, runtime)
    return runtime


def install() -> None:
    """Wrap ``forward`` of the TorchScript module classes (once)."""
    for cls in _PATCHED:
        original = cls.__dict__["forward"]
        if not isinstance(original, _FusingForward):
            cls.forward = _FusingForward(original)
