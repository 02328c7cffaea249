"""Calibration: the running input range of one quantized layer and the scales derived from it.

Follows Cambricon's minmax observer: each observed pass contributes its minimum and maximum
(times ``data_scale``); ``use_avg`` averages them over passes, otherwise the extremes are kept;
only the first ``iteration`` passes count. ``scale = qmax / absmax`` (1.0 for an all-zero range).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from mluverify.device.quantization._qconfig import QConfig
from mluverify.errors import InvalidArgument


# Below this range qmax / absmax would overflow float32 (where scales are stored) for int16;
# such a range is treated like an all-zero one.
_TINY_RANGE = 32767 / torch.finfo(torch.float32).max


def scale_of(absmax: float, qmax: int) -> float:
    """``qmax / absmax``; a zero range quantizes exactly with any scale, Cambricon writes 1.0."""
    return qmax / absmax if absmax > _TINY_RANGE else 1.0


def weight_scales(weight: torch.Tensor, qmax: int, per_channel: bool, layer: str) -> torch.Tensor:
    """One float32 scale per output channel (all equal unless ``per_channel``)."""
    _check_finite(weight, f"the weight of layer {layer!r}")
    absmax = weight.detach().abs().flatten(1).amax(1).double()
    if not per_channel:
        absmax = absmax.amax().expand_as(absmax)
    scales = torch.where(absmax > _TINY_RANGE, qmax / absmax.clamp_min(_TINY_RANGE), 1.0)
    return scales.float()


def _check_finite(tensor: torch.Tensor, what: str) -> None:
    finite = torch.isfinite(tensor)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise InvalidArgument(f"{what} holds {bad} NaN/Inf value(s) during calibration; "
                              "no scale can be computed from it (clean the calibration data)")


@dataclass
class InputObserver:
    """The observed input range of one layer (mutable calibration state, not a setting)."""

    layer: str
    config: QConfig
    passes: int = 0
    ignored: int = 0
    min_val: float = 0.0
    max_val: float = 0.0

    def observe(self, x: torch.Tensor) -> bool:
        """Record one pass; returns False (and warns once) when ``iteration`` passes are done."""
        if self.passes >= self.config.iteration:
            if self.ignored == 0:
                # No layer name: one warning per model, not one per layer.
                warnings.warn(f"qconfig 'iteration' is {self.config.iteration}: later calibration "
                              "passes are ignored", stacklevel=4)
            self.ignored += 1
            return False
        _check_finite(x, f"the input of layer {self.layer!r}")
        low = float(x.detach().amin()) * self.config.data_scale
        high = float(x.detach().amax()) * self.config.data_scale
        self.min_val, self.max_val = self._merged(low, high)
        self.passes += 1
        return True

    def _merged(self, low: float, high: float) -> tuple[float, float]:
        if self.passes == 0:
            return low, high
        if self.config.use_avg:
            n = self.passes
            return (self.min_val * n + low) / (n + 1), (self.max_val * n + high) / (n + 1)
        return min(self.min_val, low), max(self.max_val, high)

    @property
    def absmax(self) -> float:
        return max(self.max_val, -self.min_val)

    def scale(self, qmax: int) -> float:
        return scale_of(self.absmax, qmax)
