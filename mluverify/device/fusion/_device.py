"""The few things fusion needs from the emulated device, in one place.

Tensors that are not on the device pass through unchanged, so fused programs also run (and are
tested) on the CPU. Only device submodules are imported: this package is imported while
``mluverify.device`` itself is still being set up.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Iterator

import torch

from mluverify.device import _fusion_switch, numerics
from mluverify.device._fallback import track_fallbacks
from mluverify.device._storage import DEVICE_TYPE, as_cpu as _view_as_cpu, wrap_cpu
from mluverify.device.kernels import kernel_mode


def on_device(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE_TYPE


def as_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor aliasing a device tensor's data (no copy); CPU tensors unchanged."""
    return _view_as_cpu(tensor) if on_device(tensor) else tensor


def as_device(tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor adopting a CPU tensor's memory (no copy)."""
    return wrap_cpu(tensor)


def to_device(tensor: torch.Tensor) -> torch.Tensor:
    """A device copy of ``tensor`` (device tensors unchanged)."""
    return tensor if on_device(tensor) else tensor.to(DEVICE_TYPE)


def fusion_enabled() -> bool:
    """``_jit_override_can_fuse_on_mlu``: whether fused execution is on (default True)."""
    return _fusion_switch._jit_can_fuse_on_mlu()


def matmul_mantissa_bits() -> int | None:
    """The active profile's float32 conv/matmul precision (None: exact float32)."""
    return numerics.active_profile().matmul_float32_mantissa_bits


def fused_kernel(op_name: str):
    """The device's ``cnml`` kernel for ``op_name`` (CPU tensors in and out), or None."""
    from mluverify.device import kernel_registry

    return kernel_registry().kernel(op_name, "cnml")


def round_mantissa(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    return numerics.round_mantissa(tensor, bits)


@contextlib.contextmanager
def per_op_kernels() -> Iterator[collections.Counter]:
    """Run ops outside the fusion groups as CNNL kernels; yield the CPU fallbacks they made."""
    with kernel_mode("cnnl"), track_fallbacks() as tracker:
        yield tracker.counts
