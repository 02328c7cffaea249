"""``torch.mlu``: the device module torch asks about the emulated MLU, registered on import.

Registered apart from the device itself (``_backend``): its calls reach the card's queues, the
device's generator and its memory, which are built on the registered device, so this module sits
above them and they know nothing of it. It also tells other parts of mluverify what they may ask
of the device without importing it: the dump reads device memory in place through ``as_cpu``,
``read_bytes`` and ``work_queued`` (``mluverify.dump._host_memory``).
"""
from __future__ import annotations

import torch

from mluverify.device import _storage, mlu_model, training
from mluverify.device._backend import DEVICE_TYPE


class DeviceModule:
    """``torch.mlu``: what torch asks of a device module."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return torch.ops.mluverify_native.cards()

    @staticmethod
    def current_device() -> int:
        return torch.accelerator.current_device_index()

    @staticmethod
    def set_device(index: int) -> None:
        torch.accelerator.set_device_index(index)

    @staticmethod
    def synchronize(device: int | str | torch.device | None = None) -> None:
        """``torch.mlu.synchronize()``: wait for every queue of the card (default: the current one)."""
        if isinstance(device, int):
            device = torch.device(DEVICE_TYPE, device)
        index = None if device is None else torch.device(device).index
        mlu_model.synchronize(-1 if index is None else index)

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    # Its memory is the host's: what a dump reads in place (mluverify.dump._host_memory).
    as_cpu = staticmethod(_storage.as_cpu)
    read_bytes = staticmethod(_storage.read_bytes)
    work_queued = staticmethod(_storage.work_queued)

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        """Seed the device's own generator (dropout masks); ``torch.manual_seed`` calls this."""
        training.manual_seed(seed)


def _register() -> None:
    if not hasattr(torch, DEVICE_TYPE):  # once per process (_backend refused any other "mlu")
        torch._register_device_module(DEVICE_TYPE, DeviceModule())


_register()
