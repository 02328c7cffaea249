"""Quantization settings: the seeds' qconfig keys, the quantized dtypes and ``quantized_mode``.

Decisions are pure functions on frozen dataclasses; every rejection names the bad key or value
and lists what would be accepted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from mluverify.errors import InvalidArgument, valid_choice

# Largest magnitude of each symmetric quantized type (Cambricon: scale = qmax / absmax).
QMAX = {"int8": 127, "int16": 32767}
METHODS = ("minmax",)
# Cambricon's checkpoint field: 1 int8, 2 int16, 3 int8 per-channel, 4 int16 per-channel.
_MODE_OF = {("int8", False): 1, ("int16", False): 2, ("int8", True): 3, ("int16", True): 4}
_DTYPE_OF_MODE = {mode: key for key, mode in _MODE_OF.items()}
# The vendor's own TestModel example spells ``use_avg`` as ``use_ave``; its scripts must run
# unchanged, so the misspelling is accepted as a synonym rather than rejected as unknown.
_KEY_ALIASES = {"use_ave": "use_avg"}


@dataclass(frozen=True)
class QConfig:
    """The calibration settings of ``quantize_dynamic_mlu`` (the seeds' ``qconfig_spec``).

    ``use_avg``: average the per-pass minima and maxima instead of keeping the extremes.
    ``data_scale``: multiply the observed input range by this factor.
    ``firstconv``: the first ``nn.Conv2d`` normalises raw 0..255 pixels on the device with
    ``(x - mean*255) / (std*255)``; ``mean``/``std`` are per channel, in [0, 1].
    ``per_channel``: one weight scale per output channel. ``method``: ``'minmax'`` only.
    ``iteration``: how many calibration forward passes are observed (later ones are ignored).
    ``layers``: per-layer dtypes (mluverify's extension; the seeds' qconfig is model-wide):
    ``(qualified layer name, 'int8' | 'int16' | None)`` pairs, ``None`` keeping the layer float;
    layers not named take ``quantize_dynamic_mlu``'s ``dtype``.
    """

    use_avg: bool = False
    data_scale: float = 1.0
    firstconv: bool = False
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    per_channel: bool = False
    method: str = "minmax"
    iteration: int = 1
    layers: tuple[tuple[str, str | None], ...] = ()

    def layer_dtype(self, name: str, default: str) -> str | None:
        """The dtype layer ``name`` is quantized to (None: it stays float)."""
        return dict(self.layers).get(name, default)


QCONFIG_KEYS = tuple(QConfig.__dataclass_fields__)


@dataclass(frozen=True)
class QuantMode:
    """One value of ``quantized_mode``: the integer type and whether weights are per channel."""

    dtype: str
    per_channel: bool

    @property
    def qmax(self) -> int:
        return QMAX[self.dtype]

    @property
    def code(self) -> int:
        return _MODE_OF[(self.dtype, self.per_channel)]

    @classmethod
    def from_code(cls, code: int) -> "QuantMode":
        """Decode a checkpoint's ``quantized_mode``; unknown codes raise InvalidArgument."""
        try:
            return cls(*_DTYPE_OF_MODE[int(code)])
        except KeyError:
            raise valid_choice("quantized_mode", int(code), list(_DTYPE_OF_MODE)) from None


def parse_dtype(dtype: str | None) -> str:
    """The quantized dtype name; ``None`` means ``'int8'``."""
    if dtype is None:
        return "int8"
    if dtype not in QMAX:
        raise valid_choice("quantization dtype", dtype, list(QMAX))
    return dtype


def parse_qconfig(spec: Mapping[str, Any] | None) -> QConfig:
    """Validate a seeds-style qconfig dict into a QConfig (``None`` gives the defaults)."""
    if spec is None:
        return QConfig()
    if not isinstance(spec, Mapping):
        raise InvalidArgument(
            f"qconfig_spec must be a dict such as {{'use_avg': False, 'data_scale': 1.0}}, "
            f"got {spec!r} (type={type(spec).__name__})")
    values = {}
    for key, value in spec.items():
        name = _KEY_ALIASES.get(key, key)
        if name not in QCONFIG_KEYS:
            raise valid_choice("qconfig key", key, QCONFIG_KEYS)
        values[name] = value
    return _checked(QConfig(**{**values, **_normalised(values)}))


def _normalised(values: Mapping[str, Any]) -> dict[str, Any]:
    """Lists of mean/std become tuples of floats (so the settings stay hashable)."""
    out = {}
    for key in ("mean", "std"):
        if values.get(key) is not None:
            out[key] = tuple(float(v) for v in _as_sequence(key, values[key]))
    if "layers" in values:
        out["layers"] = _layer_dtypes(values["layers"])
    return out


def _layer_dtypes(layers: Any) -> tuple[tuple[str, str | None], ...]:
    """``{'fc1': 'int16', 'conv1': None}`` as sorted pairs; names are checked against the model
    by ``quantize_dynamic_mlu``, dtypes here."""
    if not isinstance(layers, Mapping):
        raise InvalidArgument(f"qconfig 'layers' must map layer names to 'int8', 'int16' or None (float), "
                              f"e.g. {{'fc1': 'int16'}}; got {layers!r}")
    for name, dtype in layers.items():
        if not isinstance(name, str):
            raise InvalidArgument(f"qconfig 'layers' keys must be qualified layer names (str), got {name!r}")
        if dtype is not None and dtype not in QMAX:
            raise InvalidArgument(f"qconfig 'layers' gives layer {name!r} the dtype {dtype!r}; "
                                  f"valid: 'int8', 'int16', None (keep the layer float)")
    return tuple(sorted(layers.items()))


def _as_sequence(key: str, value: Any) -> list:
    if isinstance(value, (int, float)):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise InvalidArgument(f"qconfig {key!r} must be a list of per-channel values, got {value!r}") from None


def _checked(config: QConfig) -> QConfig:
    for key in ("use_avg", "firstconv", "per_channel"):
        if not isinstance(getattr(config, key), bool):
            raise InvalidArgument(f"qconfig {key!r} must be True or False, got {getattr(config, key)!r}")
    if config.method not in METHODS:
        raise valid_choice("quantization method", config.method, METHODS)
    if not (isinstance(config.data_scale, (int, float)) and math.isfinite(config.data_scale)
            and config.data_scale > 0):
        raise InvalidArgument(f"qconfig 'data_scale' must be a finite number > 0, got {config.data_scale!r}")
    if isinstance(config.iteration, bool) or not isinstance(config.iteration, int) or config.iteration < 1:
        raise InvalidArgument(f"qconfig 'iteration' must be an integer >= 1, got {config.iteration!r}")
    if config.firstconv:
        _check_mean_std(config)
    return config


def _check_mean_std(config: QConfig) -> None:
    if config.mean is None or config.std is None:
        raise InvalidArgument(
            "qconfig 'firstconv': True needs 'mean' and 'std' (per-channel values in [0, 1], "
            f"e.g. 'mean': [0], 'std': [1/255]); got mean={config.mean!r}, std={config.std!r}")
    if len(config.mean) != len(config.std):
        raise InvalidArgument(f"qconfig 'mean' and 'std' must have one value per channel each; "
                              f"got mean={config.mean!r}, std={config.std!r}")
    if not all(0.0 <= m <= 1.0 for m in config.mean):
        raise InvalidArgument(f"qconfig 'mean' values must lie in [0, 1] (they are multiplied by 255 "
                              f"on the device); got {config.mean!r}")
    if not all(0.0 < s <= 1.0 for s in config.std):
        raise InvalidArgument(f"qconfig 'std' values must lie in (0, 1] (they are multiplied by 255 "
                              f"on the device); got {config.std!r}")


def check_firstconv_layer(name: str, in_channels: int, config: QConfig) -> None:
    """The first conv can normalise only 1 (gray), 3 (RGB) or 4 (RGBA) channel pixels."""
    if in_channels not in (1, 3, 4):
        raise InvalidArgument(
            f"qconfig 'firstconv' applies to the first Conv2d {name!r}, whose in_channels is "
            f"{in_channels}; firstconv needs 1, 3 or 4 input channels (set 'firstconv': False)")
    if len(config.mean) not in (1, in_channels):
        raise InvalidArgument(
            f"qconfig 'mean'/'std' give {len(config.mean)} values but the first Conv2d {name!r} "
            f"has {in_channels} input channels; give 1 or {in_channels} values")
