"""Devices whose memory is the host's (the emulated MLU): the dump reads their tensors in place.

A device says so through the module it registers with torch (``torch.<device type>``, e.g.
``torch.mlu``): that module has ``as_cpu``, ``read_bytes`` and ``work_queued`` (``HostMemory``).
The emulated MLU's does (``mluverify.device._device_module``). The dump asks torch rather than
importing the device: ``import mluverify.device`` registers the emulator, which must not happen
in a process that dumps the CPU, CUDA or a real ``torch_mlu`` (whose module has none of these,
so its tensors are copied to the host like any other device's).
"""
from __future__ import annotations

from typing import Protocol

import torch


class HostMemory(Protocol):
    """What the dump reads from a device whose memory is the host's."""

    def as_cpu(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CPU tensor aliasing ``tensor``'s memory, once no queued op writes it any more."""

    def read_bytes(self, tensor: torch.Tensor, nbytes: int) -> bytes:
        """The first ``nbytes`` of ``tensor``'s memory, once no queued op writes it any more."""

    def work_queued(self) -> bool:
        """Whether an op is still queued (its results not yet in memory)."""


def host_memory(device_type: str) -> HostMemory | None:
    """The device module of ``device_type`` when its memory is the host's, else None."""
    module = getattr(torch, device_type, None)
    return module if hasattr(module, "as_cpu") else None


def privateuse1_host_memory() -> HostMemory | None:
    """The PrivateUse1 back end's device module when its memory is the host's, else None."""
    return host_memory(torch._C._get_privateuse1_backend_name())
