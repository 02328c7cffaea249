"""Numerics of the emulated MLU: what the device computes with, and the primitives it computes by.

``docs/device.md`` ("Numerics") is the user's description; this module is the one place that
decides. Three settings, all validated (ValueError listing the valid values):

* **core version** (``"MLU270"`` default, ``"MLU370"``) selects a ``NumericsProfile``:
  MLU270 quantizes the floating inputs of the matmul class (convolution, mm, addmm, bmm, and
  so linear, matmul and the RNN gates) before computing, as seed 002's quantization chapter
  says the stack must; MLU370 multiplies float32 inputs rounded to TF32 (10 mantissa bits).
* **matmul precision** (MLU270): ``"int16"`` (default), ``"int8"``, ``"int31"`` or ``"float"``
  (no quantization: the CPU's float32 arithmetic, the behaviour before quantization by
  default); environment variable ``MLUVERIFY_MATMUL_PRECISION``, or ``set_matmul_precision``.
* **core number** (1 default, 4, 16; seeds 001/003 ``ct.set_core_number``): how many cores a
  fused (inference) program's reductions are split across. Layer by layer (CNNL) always
  uses ``LAYER_BY_LAYER_CORES``.

The settings are process-wide, like the seeds' ``ct.set_*`` calls: autograd runs backward
kernels on its own thread, which must compute with the settings its forward ran under (a
``ContextVar`` would not reach that thread). ``numerics_settings(...)`` changes them for a
``with`` block and restores them.

Public primitives (used by the kernels in ``cnnl_ops``, ``reductions`` and ``contractions``,
and by the backward kernels): ``quantization_scale``, ``quantize``, ``dequantized``,
``round_mantissa``, ``matmul_operand``, ``to_compute``.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import torch

from mluverify.errors import valid_choice


@dataclass(frozen=True)
class NumericsProfile:
    """How one MLU core version computes.

    ``matmul_float32_mantissa_bits``: None keeps float32 inputs of the matmul class as they
    are; an int (10 = TF32) rounds them to that many explicit mantissa bits first.
    ``quantizes_matmul``: the matmul class quantizes its inputs (to the matmul precision).
    ``half_compute_dtype``: the dtype float16 matmul / reduction ops compute in.
    """

    core_version: str
    matmul_float32_mantissa_bits: int | None
    quantizes_matmul: bool = False
    half_compute_dtype: torch.dtype = torch.float32

    @property
    def reduces_float32_matmul(self) -> bool:
        return self.matmul_float32_mantissa_bits is not None


PROFILES: dict[str, NumericsProfile] = {
    "MLU270": NumericsProfile("MLU270", matmul_float32_mantissa_bits=None, quantizes_matmul=True),
    "MLU370": NumericsProfile("MLU370", matmul_float32_mantissa_bits=10),
}
DEFAULT_CORE_VERSION = "MLU270"

# Largest magnitude of each symmetric integer type. int31 is a 31-bit signed integer
# (sign + 30 magnitude bits): its values need float64 to be held exactly.
QMAX: dict[str, int] = {"int8": 127, "int16": 32767, "int31": 2**30 - 1}
FLOAT = "float"
MATMUL_PRECISIONS: tuple[str, ...] = ("int8", "int16", "int31", FLOAT)
DEFAULT_MATMUL_PRECISION = "int16"
MATMUL_PRECISION_ENV = "MLUVERIFY_MATMUL_PRECISION"

CORE_NUMBERS: tuple[int, ...] = (1, 4, 16)
# Cores a layer-by-layer (CNNL) op's reductions are split across: fixed, whatever core_number
# says (the seeds' core number "applies only to inference mode").
LAYER_BY_LAYER_CORES = 4


def profile_for(core_version: str) -> NumericsProfile:
    """The profile of ``core_version``; ValueError (InvalidArgument) lists the valid versions."""
    try:
        return PROFILES[core_version]
    except (KeyError, TypeError):
        raise valid_choice("MLU core version", core_version, PROFILES) from None


def check_core_number(core_number: int) -> int:
    if isinstance(core_number, bool) or core_number not in CORE_NUMBERS:
        raise valid_choice("MLU core number", core_number, CORE_NUMBERS)
    return core_number


def check_matmul_precision(precision: str) -> str:
    if precision not in MATMUL_PRECISIONS:
        raise valid_choice("MLU matmul precision", precision, MATMUL_PRECISIONS)
    return precision


@dataclass(frozen=True)
class NumericsSettings:
    """Everything the device's numerics depend on (validated on construction)."""

    core_version: str = DEFAULT_CORE_VERSION
    core_number: int = 1
    matmul_precision: str = DEFAULT_MATMUL_PRECISION

    def __post_init__(self) -> None:
        profile_for(self.core_version)
        check_core_number(self.core_number)
        check_matmul_precision(self.matmul_precision)

    @property
    def profile(self) -> NumericsProfile:
        return PROFILES[self.core_version]

    @property
    def qmax(self) -> int | None:
        """The quantization range of the matmul class, or None where it does not quantize."""
        if not self.profile.quantizes_matmul:
            return None
        return QMAX.get(self.matmul_precision)

    def cores(self, mode: str) -> int:
        """How many cores a reduction is split across in kernel mode ``mode`` (``cnml``:
        fused inference, the core number; ``cnnl``: ``LAYER_BY_LAYER_CORES``)."""
        return self.core_number if mode == "cnml" else LAYER_BY_LAYER_CORES


@functools.lru_cache(maxsize=8)
def _settings_from_env(precision: str) -> NumericsSettings:
    return NumericsSettings(matmul_precision=precision.strip() or DEFAULT_MATMUL_PRECISION)


class _Current:
    """The settings in force (process-wide, see the module docstring); None until first read,
    so the environment variable is read when the device first computes."""

    settings: NumericsSettings | None = None


def active_settings() -> NumericsSettings:
    """The numerics settings the device computes with now."""
    if _Current.settings is None:
        _Current.settings = _settings_from_env(os.environ.get(MATMUL_PRECISION_ENV, ""))
    return _Current.settings


def active_profile() -> NumericsProfile:
    return active_settings().profile


def active_core_version() -> str:
    """The core version the device computes as (``"MLU270"`` / ``"MLU370"``)."""
    return active_settings().core_version


def cores_for(mode: str) -> int:
    """How many cores a reduction of kernel mode ``mode`` is split across now: the record's
    ``core_number`` of a run in that mode (``cnnl`` layer by layer, ``cnml`` fused)."""
    from mluverify.device.kernels import MODES

    if mode not in MODES:
        raise valid_choice("kernel mode", mode, MODES)
    return active_settings().cores(mode)


def active_cores() -> int:
    """Cores of the kernel mode running now (what a kernel splits its reductions across)."""
    from mluverify.device.kernels import active_mode

    return active_settings().cores(active_mode())


def _replace_settings(**changes: object) -> NumericsSettings:
    _Current.settings = replace(active_settings(), **changes)
    return _Current.settings


def set_core_version(core_version: str) -> NumericsProfile:
    """Select the numerics profile of ``core_version`` for every following device op."""
    return _replace_settings(core_version=profile_for(core_version).core_version).profile


def set_core_number(core_number: int) -> None:
    """Cores of fused (inference) programs: 1, 4 or 16; ValueError lists the valid numbers."""
    _replace_settings(core_number=check_core_number(core_number))


def set_matmul_precision(precision: str) -> None:
    """What MLU270's matmul class quantizes to: ``"int8"``, ``"int16"``, ``"int31"`` or
    ``"float"`` (no quantization); ValueError lists the valid values."""
    _replace_settings(matmul_precision=check_matmul_precision(precision))


@contextlib.contextmanager
def numerics_settings(core_version: str | None = None, core_number: int | None = None,
                      matmul_precision: str | None = None) -> Iterator[NumericsSettings]:
    """Run the ``with`` block under other settings (None keeps one); restored afterwards."""
    previous = active_settings()
    changes = {name: value for name, value in (
        ("core_version", core_version), ("core_number", core_number), ("matmul_precision", matmul_precision),
    ) if value is not None}
    settings = replace(previous, **changes)  # validated before anything changes
    _Current.settings = settings
    try:
        yield settings
    finally:
        _Current.settings = previous


# ---------------------------------------------------------------------------------------------
# rounding and quantization primitives
# ---------------------------------------------------------------------------------------------

# Below this range qmax / absmax would overflow float32 (where scales are held) for int16;
# such a range is treated like an all-zero one, as the quantization tool does.
_TINY_RANGE = 32767 / float(torch.finfo(torch.float32).max)


def round_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """float32 ``x`` rounded to ``bits`` (0..22) explicit mantissa bits, ties to even (a new
    contiguous tensor).

    Works on the bit pattern: add half an ulp of the target precision (less one, plus the kept
    lowest bit, for ties-to-even) and clear the dropped bits; a carry into the exponent is the
    correct rounding up. Infinities stay infinite, NaNs stay NaN (a NaN whose payload sits only
    in the dropped bits would round to infinity: NaNs are kept as they are). Done by the
    device's C++ extension (``_native.cpp``), in one pass on every intra-op thread.
    """
    if x.dtype != torch.float32:
        raise TypeError(f"round_mantissa expects float32, got {x.dtype}")
    return torch.ops.mluverify_native.round_mantissa(x.detach(), bits)


def quantization_scale(absmax: float, qmax: int) -> float:
    """``qmax / absmax`` as the quantization tool computes it: the quotient of the float32
    absmax in float64, held as a float32 number; 1.0 for an all-zero (or tiny) range."""
    if not absmax > _TINY_RANGE:
        return 1.0
    return float(np.float32(qmax / absmax))


def absmax(x: torch.Tensor) -> float:
    """``max |x|`` (NaN when ``x`` holds a NaN, 0 for an empty tensor)."""
    if x.numel() == 0:
        return 0.0
    low, high = (float(v) for v in torch.aminmax(_in_memory_order(x)))
    if math.isnan(low) or math.isnan(high):
        return math.nan
    return max(high, -low)


def _in_memory_order(x: torch.Tensor) -> torch.Tensor:
    """``x`` viewed with its dims in memory order when it is channels-last (as oneDNN's
    convolutions return): a full reduction over it then runs several times faster."""
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return x.permute(0, 2, 3, 1)
    return x


@dataclass(frozen=True)
class Quantized:
    """A tensor quantized symmetrically per tensor: integer ``values`` (held in float32 up to
    int16, float64 for int31) and the float32 ``scale`` (``x ~ values / scale``)."""

    values: torch.Tensor
    scale: float


def _compute_dtype(qmax: int) -> torch.dtype:
    """float32 holds every int8 / int16 value; int31 values need float64."""
    return torch.float64 if qmax >= 2**24 else torch.float32


def quantize(x: torch.Tensor, qmax: int) -> Quantized | None:
    """``round_half_even(x * scale)`` with ``scale = quantization_scale(absmax(x), qmax)``.

    ``x * scale`` is formed in float32 for int8 / int16 (as the quantization tool does) and in
    float64 for int31 (whose values need 31 bits). No clamp is needed: rounding is monotonic,
    so ``|x * scale| <= fl(absmax * scale) < qmax + 1/2``. None when ``x`` holds Inf or NaN:
    such a tensor has no quantization scale.
    """
    largest = absmax(x)
    if not np.isfinite(largest):
        return None
    scale = quantization_scale(largest, qmax)
    values = torch.mul(x.to(_compute_dtype(qmax)), scale).round_()
    return Quantized(values, scale)


def dequantized(x: torch.Tensor, qmax: int) -> torch.Tensor | None:
    """``x`` quantized (``quantize``) and back: ``values * step`` with ``step = 1 / scale``
    rounded to the values' dtype (float32; float64 for int31), one rounding per element. None
    when ``x`` holds Inf or NaN. (torch's ``fake_quantize_per_tensor_affine`` computes the same
    for int8 / int16 but is an order of magnitude slower on the CPU.)"""
    quantized = quantize(x, qmax)
    if quantized is None:
        return None
    step = 1.0 / quantized.scale if qmax >= 2**24 else float(np.float32(1) / np.float32(quantized.scale))
    return quantized.values.mul_(step)


def to_compute(x: torch.Tensor, profile: NumericsProfile) -> torch.Tensor:
    """A matmul / reduction input in the dtype the profile computes it in (float16 widened)."""
    if x.dtype == torch.float16:
        return x.to(profile.half_compute_dtype)
    return x


def matmul_operand(x: torch.Tensor, settings: NumericsSettings) -> torch.Tensor:
    """A floating factor of a product as the device multiplies it, for ops whose arithmetic is
    the CPU's (``cnnl_ops.matmul``): float16 widened; on a quantizing profile, quantized and
    dequantized (float32; float64 for int31); on MLU370, float32 rounded to TF32."""
    profile = settings.profile
    qmax = settings.qmax
    if qmax is not None and x.dtype in (torch.float16, torch.float32):
        operand = dequantized(x, qmax)
        if operand is not None:
            return operand
    if x.dtype == torch.float16:
        return x.to(profile.half_compute_dtype)
    if x.dtype == torch.float32 and profile.matmul_float32_mantissa_bits is not None:
        return round_mantissa(x, profile.matmul_float32_mantissa_bits)
    return x
