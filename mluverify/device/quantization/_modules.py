"""MLULinear and MLUConv1d/2d/3d: float layers that run quantized on the emulated MLU.

State dict layout (Cambricon's): ``weight``/``bias`` stay float; ``scale`` is
``[input_scale, weight_scale]`` with ``scale = qmax / absmax``; ``quantized_mode`` is 1 int8,
2 int16, 3 int8 per channel, 4 int16 per channel; ``scale_weight_per_channel`` holds one weight
scale per output channel (all equal to ``scale[1]`` unless per channel); a ``firstconv`` layer
adds ``input_mean`` and ``input_std``, already multiplied by 255.

On the CPU a layer computes in float (and, when made with ``gen_quant=True``, observes its
input for calibration); on ``mlu`` it runs the exact integer kernels of the custom ops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mluverify.device.quantization._observer import InputObserver, weight_scales
from mluverify.device.quantization._ops import quant_conv, quant_linear
from mluverify.device.quantization._qconfig import QConfig, QuantMode, check_firstconv_layer
from mluverify.errors import InvalidArgument

_QPARAM_KEYS = ("scale", "quantized_mode")
_CHANNEL_KEY = "scale_weight_per_channel"
_FIRSTCONV_KEYS = ("input_mean", "input_std")
# Calibration constants: kept float32 whatever ``.half()`` does to the layer (an int16 weight
# scale easily exceeds float16's 65504).
_FLOAT32_BUFFERS = ("scale", _CHANNEL_KEY, *_FIRSTCONV_KEYS)


@dataclass(frozen=True)
class LayerSettings:
    """How ``quantize_dynamic_mlu`` asks a quantized class to replace one float layer.

    ``name`` is the layer's qualified name in the model (used in error messages);
    ``firstconv`` is True only for the model's first ``nn.Conv2d`` when the qconfig asks.
    """

    name: str
    qconfig: QConfig
    dtype: str
    gen_quant: bool
    firstconv: bool = False


@dataclass(frozen=True)
class QParams:
    """The quantization parameters a layer runs with, as plain numbers (see ``_ops``)."""

    input_scale: float
    weight_scales: tuple[float, ...]
    qmax: int
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    @classmethod
    def from_buffers(cls, scale: torch.Tensor, channel_scales: torch.Tensor, mode: torch.Tensor,
                     mean: torch.Tensor | None, std: torch.Tensor | None) -> "QParams":
        def numbers(t):
            return None if t is None else tuple(t.detach().float().cpu().tolist())

        return cls(float(scale.reshape(-1)[0]), numbers(channel_scales),
                   QuantMode.from_code(int(mode.reshape(-1)[0])).qmax, numbers(mean), numbers(std))


class _QuantizedLayer:
    """What MLULinear and MLUConv* share: quantization buffers, calibration, checkpoint loading.

    Constructed with the arguments of the float class it quantizes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_quantization(self.weight.shape[0], device=self.weight.device)

    def _init_quantization(self, out_channels: int, device: Any = None) -> None:
        self.register_buffer("scale", torch.ones(2, device=device))
        self.register_buffer("quantized_mode", torch.ones(1, dtype=torch.int32, device=device))
        self.register_buffer(_CHANNEL_KEY, torch.ones(out_channels, device=device))
        for key in _FIRSTCONV_KEYS:
            self.register_buffer(key, None)
        self.layer_name = type(self).__name__
        self.observer: InputObserver | None = None
        # Set once calibrated or loaded from a checkpoint: the device refuses to run without.
        self.qparams: QParams | None = None

    @property
    def has_qparams(self) -> bool:
        return self.qparams is not None

    def _adopt(self, module: nn.Module, settings: LayerSettings) -> None:
        """Take the float layer's parameters and set up calibration as ``settings`` say."""
        self.weight = module.weight
        self.bias = module.bias
        self._init_quantization(self.weight.shape[0], device=self.weight.device)
        self.layer_name = settings.name
        self.quantized_mode.fill_(QuantMode(settings.dtype, settings.qconfig.per_channel).code)
        if settings.gen_quant:
            self.observer = InputObserver(settings.name, settings.qconfig)
        if settings.firstconv:
            check_firstconv_layer(settings.name, module.in_channels, settings.qconfig)
            self.input_mean = torch.tensor(settings.qconfig.mean, device=self.weight.device) * 255
            self.input_std = torch.tensor(settings.qconfig.std, device=self.weight.device) * 255

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Calibrate on CPU passes (gen_quant); compute in float until quantization parameters
        exist, then through the quantized op (float on the CPU, exact integers on mlu)."""
        self._observe(input)
        params = self._device_qparams(input)
        return self._float_forward(input) if params is None else self._quantized_forward(input, params)

    def _observe(self, input: torch.Tensor) -> None:
        """Calibrate on a CPU pass: update the input range, then every scale buffer."""
        if self.observer is None or input.device.type != "cpu" or not self.observer.observe(input):
            return
        mode = QuantMode.from_code(int(self.quantized_mode[0]))
        per_channel = weight_scales(self.weight, mode.qmax, mode.per_channel, self.layer_name)
        with torch.no_grad():
            self.scale.copy_(torch.tensor([self.observer.scale(mode.qmax), float(per_channel.min())]))
            getattr(self, _CHANNEL_KEY).copy_(per_channel)
        self._refresh_qparams()

    def _refresh_qparams(self) -> None:
        self.qparams = QParams.from_buffers(self.scale, getattr(self, _CHANNEL_KEY), self.quantized_mode,
                                            self.input_mean, self.input_std)

    def _device_qparams(self, input: torch.Tensor) -> QParams | None:
        """The parameters to quantize with; None on the CPU before calibration (float layer).

        On the device, a layer without quantization parameters is an error.
        """
        if input.device.type == "cpu" or self.qparams is not None:
            return self.qparams
        raise InvalidArgument(
            f"layer {self.layer_name!r} has no quantization parameters: calibrate it "
            "(quantize_dynamic_mlu(..., gen_quant=True) and CPU forward passes) or load a "
            "checkpoint saved from a calibrated model before running it on the device")

    def _apply(self, fn, recurse=True):
        kept = {key: self._buffers[key] for key in _FLOAT32_BUFFERS if self._buffers.get(key) is not None}
        super()._apply(fn, recurse)
        for key, original in kept.items():  # follow the device move, keep float32
            self._buffers[key] = original.to(self._buffers[key].device)
        return self

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        present = [key for key in _FIRSTCONV_KEYS if prefix + key in state_dict]
        for key in present:  # a firstconv checkpoint creates the buffers it fills
            setattr(self, key, torch.empty_like(state_dict[prefix + key], device=self.scale.device))
        _fill_channel_scales(state_dict, prefix)
        missing = [prefix + key for key in (*_QPARAM_KEYS, _CHANNEL_KEY) if prefix + key not in state_dict]
        if missing and self.observer is None:
            error_msgs.append(
                f"quantization parameters missing for layer {prefix.rstrip('.') or self.layer_name!r}: "
                f"{', '.join(missing)}; load a checkpoint saved from a model calibrated with "
                "quantize_dynamic_mlu(..., gen_quant=True)")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if not missing:
            self._refresh_qparams()


def _fill_channel_scales(state_dict: dict, prefix: str) -> None:
    """Per-tensor checkpoints of Cambricon's tool have no per-channel vector: derive it."""
    scale, mode = state_dict.get(prefix + "scale"), state_dict.get(prefix + "quantized_mode")
    weight = state_dict.get(prefix + "weight")
    if prefix + _CHANNEL_KEY in state_dict or scale is None or mode is None or weight is None:
        return
    if not QuantMode.from_code(int(mode.reshape(-1)[0])).per_channel:
        state_dict[prefix + _CHANNEL_KEY] = scale.reshape(-1)[1].expand(weight.shape[0]).clone()


class MLULinear(_QuantizedLayer, nn.Linear):
    """``nn.Linear`` quantized symmetrically (int8/int16) on the emulated MLU."""

    @classmethod
    def from_float(cls, module: nn.Linear, settings: LayerSettings) -> "MLULinear":
        """The quantized replacement of ``module`` (sharing its parameters)."""
        layer = cls(module.in_features, module.out_features, module.bias is not None, device="meta")
        layer._adopt(module, settings)
        return layer

    def _float_forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input, self.weight, self.bias)

    def _quantized_forward(self, input: torch.Tensor, params: QParams) -> torch.Tensor:
        return quant_linear(input, self.weight, self.bias, params.input_scale, params.weight_scales,
                            params.qmax)


class _MLUConvNd(_QuantizedLayer):
    """The forward of MLUConv1d/2d/3d; the conv attributes come from ``nn.ConvNd``."""

    @classmethod
    def from_float(cls, module: nn.Module, settings: LayerSettings) -> "_MLUConvNd":
        """The quantized replacement of ``module`` (sharing its parameters)."""
        layer = cls(module.in_channels, module.out_channels, module.kernel_size, module.stride,
                    module.padding, module.dilation, module.groups, module.bias is not None,
                    module.padding_mode, device="meta")
        layer._adopt(module, settings)
        return layer

    def _float_forward(self, input: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(input, self.weight, self.bias)

    def _quantized_forward(self, input: torch.Tensor, params: QParams) -> torch.Tensor:
        # Raw pixels are normalised only on the device; CPU inputs come normalised already.
        firstconv = input.device.type != "cpu" and params.mean is not None
        input, padding = self._explicitly_padded(input, firstconv)
        return quant_conv(input, self.weight, self.bias, self.stride, padding, self.dilation,
                          self.groups, params.input_scale, params.weight_scales, params.qmax,
                          params.mean if firstconv else None, params.std if firstconv else None)

    def _explicitly_padded(self, input: torch.Tensor, firstconv: bool) -> tuple[torch.Tensor, list[int]]:
        """Zero padding given as numbers goes to the conv; anything else is applied first."""
        if self.padding_mode == "zeros" and not isinstance(self.padding, str):
            return input, list(self.padding)
        if self.padding_mode == "zeros" and firstconv:
            # Zeros padded before normalisation would become -mean/std, not 0.
            raise InvalidArgument(f"firstconv layer {self.layer_name!r} needs numeric padding, "
                                  f"got padding={self.padding!r}")
        mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
        padded = F.pad(input, self._reversed_padding_repeated_twice, mode=mode)
        return padded, [0] * len(self.kernel_size)


class MLUConv1d(_MLUConvNd, nn.Conv1d):
    """``nn.Conv1d`` quantized symmetrically (int8/int16) on the emulated MLU."""


class MLUConv2d(_MLUConvNd, nn.Conv2d):
    """``nn.Conv2d`` quantized symmetrically (int8/int16) on the emulated MLU; may be firstconv."""


class MLUConv3d(_MLUConvNd, nn.Conv3d):
    """``nn.Conv3d`` quantized symmetrically (int8/int16) on the emulated MLU."""