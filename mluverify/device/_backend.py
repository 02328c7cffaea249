"""Registers PrivateUse1 as torch device ``mlu`` (once per process, on first import).

Every other device module imports this first: ``torch.device("mlu")`` must parse before any
of them builds device objects. The C++ hooks and device guard (``_native``) are installed
before torch's Python back-end set-up, which then keeps them: they give the device its cards
(``MLUVERIFY_DEVICE_COUNT`` / ``[tool.mluverify] device_count``) and pinned host memory.
"""
from __future__ import annotations

import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from mluverify.device import _config, _native

DEVICE_TYPE = "mlu"


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
        from mluverify.device import mlu_model

        if isinstance(device, int):
            device = torch.device(DEVICE_TYPE, device)
        index = None if device is None else torch.device(device).index
        mlu_model.synchronize(-1 if index is None else index)

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        """Seed the device's own generator (dropout masks); ``torch.manual_seed`` calls this."""
        from mluverify.device.training import manual_seed

        manual_seed(seed)


def _register() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current == DEVICE_TYPE:
        if not isinstance(getattr(torch, DEVICE_TYPE, None), DeviceModule):
            raise RuntimeError("a real torch_mlu registered the device 'mlu' in this process; the emulated "
                               "MLU (mluverify.device) cannot load beside it")
        return
    if current != "privateuseone":
        raise RuntimeError(
            f"cannot register the emulated MLU: PrivateUse1 is already the device {current!r} "
            f"in this process (only one PrivateUse1 back end can be loaded)"
        )
    _native.load()
    torch.ops.mluverify_native.install(_config.card_count())
    _setup_privateuseone_for_python_backend(DEVICE_TYPE, backend_module=DeviceModule())
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=False, for_module=False, for_packed_sequence=False, for_storage=True
    )


_register()
