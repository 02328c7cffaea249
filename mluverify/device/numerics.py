"""Numerics profiles of the emulated MLU: what precision each op class stores and computes in.

A profile is chosen by core version (``mlu_model.set_core_version``); ``docs/device.md`` has
the table, and ``tests/device/test_numerics.py`` checks each row against an independent
computation. Op classes:

* ``matmul``: convolution (all kinds), mm/addmm/bmm (so linear and matmul);
* ``accumulate``: reductions, normalisations, softmax, pooling averages, recurrent cells;
* ``elementwise``: everything computed one element at a time.

float16 tensors are always *stored* in float16; ``matmul`` and ``accumulate`` ops compute
float16 inputs in float32 (exact products, float32 accumulation) and round the result to
float16 once; ``elementwise`` ops round every result to the storage precision. float32
``matmul`` inputs are rounded to ``matmul_float32_mantissa_bits`` explicit mantissa bits
(round to nearest, ties to even; float32 exponent range kept: TF32-like) when the profile
sets them, then multiplied and accumulated in float32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mluverify.errors import valid_choice


@dataclass(frozen=True)
class NumericsProfile:
    """How one MLU core version computes.

    ``matmul_float32_mantissa_bits``: None keeps float32 inputs of conv/matmul exact; an int
    (10 = TF32) rounds them to that many explicit mantissa bits first.
    ``half_compute_dtype``: the dtype float16 ``matmul``/``accumulate`` ops compute in.
    """

    core_version: str
    matmul_float32_mantissa_bits: int | None
    half_compute_dtype: torch.dtype = torch.float32

    @property
    def reduces_float32_matmul(self) -> bool:
        return self.matmul_float32_mantissa_bits is not None


PROFILES: dict[str, NumericsProfile] = {
    "MLU270": NumericsProfile("MLU270", matmul_float32_mantissa_bits=None),
    "MLU370": NumericsProfile("MLU370", matmul_float32_mantissa_bits=10),
}
DEFAULT_CORE_VERSION = "MLU270"


class _ProfileState:
    current: NumericsProfile = PROFILES[DEFAULT_CORE_VERSION]


def profile_for(core_version: str) -> NumericsProfile:
    """The profile of ``core_version``; ValueError (InvalidArgument) lists the valid versions."""
    try:
        return PROFILES[core_version]
    except (KeyError, TypeError):
        raise valid_choice("MLU core version", core_version, PROFILES) from None


def set_core_version(core_version: str) -> NumericsProfile:
    """Select the numerics profile of ``core_version`` for every following device op."""
    _ProfileState.current = profile_for(core_version)
    return _ProfileState.current


def active_profile() -> NumericsProfile:
    return _ProfileState.current


# ---------------------------------------------------------------------------------------------
# rounding helpers used by the kernels
# ---------------------------------------------------------------------------------------------

_MANTISSA_BITS_FLOAT32 = 23


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """float32 ``x`` rounded to ``bits`` explicit mantissa bits, ties to even (a new tensor).

    Works on the bit pattern: add half an ulp of the target precision (less one, plus the kept
    lowest bit, for ties-to-even) and clear the dropped bits; a carry into the exponent is the
    correct rounding up. Infinities stay infinite, NaNs stay NaN. Done in numpy: its integer
    ops are several times faster than torch's on a busy CPU.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"round_mantissa expects float32, got {x.dtype}")
    drop = _MANTISSA_BITS_FLOAT32 - bits
    pattern = x.detach().contiguous().numpy().reshape(-1).view(np.int32)
    rounded = np.right_shift(pattern, drop)
    rounded &= 1
    rounded += (1 << (drop - 1)) - 1
    rounded += pattern
    rounded &= ~((1 << drop) - 1)
    # A NaN whose payload sits only in the dropped bits would round to infinity: keep NaNs.
    nan = np.isnan(pattern.view(np.float32))
    if nan.any():
        rounded = np.where(nan, pattern, rounded)
    return torch.from_numpy(rounded.view(np.float32)).view(x.shape)


def to_compute(x: torch.Tensor, profile: NumericsProfile) -> torch.Tensor:
    """A ``matmul``/``accumulate`` input in the dtype the profile computes it in."""
    if x.dtype == torch.float16:
        return x.to(profile.half_compute_dtype)
    return x


def matmul_input(x: torch.Tensor, profile: NumericsProfile) -> torch.Tensor:
    """A conv/matmul input as the MLU multiplies it (float16 widened; float32 maybe TF32)."""
    if x.dtype == torch.float16:
        return x.to(profile.half_compute_dtype)
    if x.dtype == torch.float32 and profile.matmul_float32_mantissa_bits is not None:
        return round_mantissa(x, profile.matmul_float32_mantissa_bits)
    return x
