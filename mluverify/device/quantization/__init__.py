"""Quantization of the emulated MLU (``torch_mlu.core.mlu_quantize`` through the compat layer).

``quantize_dynamic_mlu`` swaps ``nn.Linear`` / ``nn.Conv1d/2d/3d`` for MLULinear / MLUConv*,
calibrates them on the CPU (``gen_quant=True``), and the checkpoint it saves runs in exact
int8/int16 arithmetic on ``mlu``. ``adaptive_quantize`` makes a model train in quantized
arithmetic on ``mlu`` (docs/training.md). ``layer_errors`` shows which layer loses accuracy.
See docs/quantization.md.
"""
from __future__ import annotations

from mluverify.device.quantization._adaptive import (
    AdaptiveConv1d, AdaptiveConv2d, AdaptiveConv3d, AdaptiveLinear, ScaleSchedule, adaptive_quantize)
from mluverify.device.quantization._layer_errors import layer_errors
from mluverify.device.quantization._modules import (
    LayerSettings, MLUConv1d, MLUConv2d, MLUConv3d, MLULinear)
from mluverify.device.quantization._ops import exact_quant_conv, exact_quant_linear, quant_conv, quant_linear
from mluverify.device.quantization._qconfig import QCONFIG_KEYS, QMAX, QConfig, QuantMode, parse_qconfig
from mluverify.device.quantization._quantize import default_mapping, quantize_dynamic_mlu, quantize_for_target

__all__ = [
    "AdaptiveConv1d", "AdaptiveConv2d", "AdaptiveConv3d", "AdaptiveLinear", "ScaleSchedule", "adaptive_quantize",
    "LayerSettings", "MLUConv1d", "MLUConv2d", "MLUConv3d", "MLULinear", "QCONFIG_KEYS", "QMAX",
    "QConfig", "QuantMode", "default_mapping", "exact_quant_conv", "exact_quant_linear",
    "layer_errors", "parse_qconfig", "quant_conv", "quant_linear", "quantize_dynamic_mlu",
    "quantize_for_target",
]
