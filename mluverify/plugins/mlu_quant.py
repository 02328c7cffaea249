"""Built-in plugin: the quantization of the emulated MLU.

Contributes the default float -> quantized class mapping of ``quantize_dynamic_mlu`` and the
device kernels of the quantized custom ops (exact int8/int16 arithmetic, the same in the
layer-by-layer ``cnnl`` and fused ``cnml`` modes). Imports the quantization package only
inside the hooks, because that package lives under the device that calls these hooks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from mluverify.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from mluverify.device.kernels import KernelRegistry


@hookimpl(trylast=True)
def mluverify_quant_mapping() -> Mapping[type, type]:
    import torch.nn as nn

    from mluverify.device import quantization as q

    return {nn.Linear: q.MLULinear, nn.Conv1d: q.MLUConv1d, nn.Conv2d: q.MLUConv2d,
            nn.Conv3d: q.MLUConv3d}


@hookimpl(tryfirst=True)  # registered first, so a third-party kernel for the same op wins
def mluverify_device_kernels(registry: KernelRegistry) -> None:
    from mluverify.device import quantization as q

    for mode in ("cnnl", "cnml"):
        registry.register("mluverify::quant_conv", q.exact_quant_conv, mode=mode)
        registry.register("mluverify::quant_linear", q.exact_quant_linear, mode=mode)
