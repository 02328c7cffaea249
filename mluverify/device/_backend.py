"""Registers PrivateUse1 as torch device ``mlu`` (once per process, on first import).

Every other device module imports this first: ``torch.device("mlu")`` must parse before any
of them builds device objects.
"""
from __future__ import annotations

import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

DEVICE_TYPE = "mlu"


class DeviceModule:
    """``torch.mlu``: what torch asks of a device module (one emulated device, index 0)."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        """Random ops run as CPU fallbacks, so ``torch.manual_seed`` already governs them."""


def _register() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current == DEVICE_TYPE:
        return
    if current != "privateuseone":
        raise RuntimeError(
            f"cannot register the emulated MLU: PrivateUse1 is already the device {current!r} "
            f"in this process (only one PrivateUse1 back end can be loaded)"
        )
    _setup_privateuseone_for_python_backend(DEVICE_TYPE, backend_module=DeviceModule())
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=False, for_module=False, for_packed_sequence=False, for_storage=True
    )


_register()
