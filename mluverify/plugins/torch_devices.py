"""Back ends for plain torch devices: ``cuda``, ``xpu``, ``mps`` when present, and ``cpu64``,
a self-check target that recomputes every case on the CPU in float64.

They prove the back-end protocol with no emulated device involved: any accelerator with a
torch device gets layer-by-layer verification (mode ``eager``, policy ``cnnl``) for free.
"""
from __future__ import annotations

from typing import Any, Callable

from mluverify.backends import Backend, BackendRegistry, Execution, map_tensors, move_module
from mluverify.case import Case
from mluverify.hookspecs import hookimpl


class TorchDeviceBackend(Backend):
    """Runs a case eagerly on a torch device, optionally in another floating dtype."""

    def __init__(self, name: str, device: str, *, compute_dtype: str | None = None) -> None:
        self.name = name
        self.device = device
        self.compute_dtype = compute_dtype
        self.modes = {"eager": "cnnl"}

    def unavailable_reason(self) -> str | None:
        import torch

        module = getattr(torch, self.device, None)
        if self.device != "cpu" and not (module is not None and module.is_available()):
            return f"torch.{self.device}.is_available() is False on this machine"
        return None

    def __repr__(self) -> str:
        return f"TorchDeviceBackend({self.name!r}, {self.device!r}, compute_dtype={self.compute_dtype!r})"

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import torch

        dtype = getattr(torch, self.compute_dtype or case.dtype)
        if isinstance(fn, torch.nn.Module):
            fn = move_module(fn, self.device, dtype)

        def to_device(t: torch.Tensor) -> torch.Tensor:
            return t.to(self.device, dtype) if t.is_floating_point() else t.to(self.device)

        def to_cpu(t: torch.Tensor) -> torch.Tensor:
            t = t.detach().cpu()
            return t.to(getattr(torch, case.dtype)) if t.is_floating_point() else t

        output = fn(*map_tensors(to_device, args), **map_tensors(to_device, kwargs))
        return Execution(map_tensors(to_cpu, output))


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(TorchDeviceBackend("cpu64", "cpu", compute_dtype="float64"))
    for device in ("cuda", "xpu", "mps"):
        registry.add(TorchDeviceBackend(device, device))
