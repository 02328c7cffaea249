"""Python numbers as ATen sees them where a schema wants a tensor: wrapped-number tensors."""
from __future__ import annotations

import torch

from mluverify.device import _backend  # noqa: F401  (loads the native ops: mark_wrapped_number)

_mark_wrapped_number = torch.ops.mluverify_native.mark_wrapped_number
# What ATen's wrapped_scalar_tensor makes of a Python number.
_WRAPPED_NUMBER_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def wrapped_number(value: bool | int | float | complex) -> torch.Tensor:
    """The 0-dim CPU tensor ATen makes of a Python number: promoted as a number, not as a tensor
    (``tensor(0.3, float32) * 1.0`` stays float32)."""
    scalar = torch.scalar_tensor(value, dtype=_WRAPPED_NUMBER_DTYPES[type(value)])
    _mark_wrapped_number(scalar)
    return scalar
