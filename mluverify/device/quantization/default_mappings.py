"""``torch_mlu.core.quantized.default_mappings`` (seed 002): which float layers
``quantize_dynamic_mlu`` replaces, and by which ``cnq`` (``torch_mlu.core.quantized.modules``) class.

The names are those of torch 1.3's ``torch.quantization.default_mappings``, which Cambricon's
file follows. Each read gives a fresh dict of the mapping in force: ``nn.Linear`` ->
``MLULinear``, ``nn.Conv1d/2d/3d`` -> ``MLUConv1d/2d/3d``, plus what plugins add through
``mluverify_quant_mapping``.
"""
from __future__ import annotations

from mluverify.device.quantization._quantize import default_mapping

MAPPING_NAMES = ("DEFAULT_MODULE_MAPPING", "DEFAULT_DYNAMIC_MODULE_MAPPING")


def __getattr__(name: str) -> dict[type, type]:
    if name in MAPPING_NAMES:
        return default_mapping()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; mappings: {', '.join(MAPPING_NAMES)}")
