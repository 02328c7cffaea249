"""Registers PrivateUse1 as torch device ``mlu`` (once per process, on first import).

Every other device module imports this first: ``torch.device("mlu")`` must parse before any
of them builds device objects. The C++ hooks and device guard (``_native``) are installed
before torch's Python back-end set-up, which then keeps them: they give the device its cards
(``MLUVERIFY_DEVICE_COUNT`` / ``[tool.mluverify] device_count``) and pinned host memory.

This is torch's ``_setup_privateuseone_for_python_backend`` less the device module
(``torch.mlu``): that one calls up into the queues and the generator, which are built on the
device this module registers, so ``_device_module`` registers it once they exist.
"""
from __future__ import annotations

import torch
from torch.utils.backend_registration import _DummyDeviceGuard, _DummyPrivateUse1Hook

from mluverify.device import _config, _native

DEVICE_TYPE = "mlu"


def _register() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current == DEVICE_TYPE:
        if not hasattr(torch.ops.mluverify_native, "install"):  # not this emulator's extension
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
    # torch's order (_setup_privateuseone_for_python_backend), the device module aside
    torch.utils.rename_privateuse1_backend(DEVICE_TYPE)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._C._acc.register_python_privateuseone_hook(_DummyPrivateUse1Hook())
    torch._C._acc.register_python_privateuseone_device_guard(_DummyDeviceGuard())
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=False, for_module=False, for_packed_sequence=False, for_storage=True
    )


_register()
