"""``quantize_dynamic_mlu`` (the seeds' entry point) and ``quantize_for_target`` (for targets)."""
from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping

import torch
import torch.nn as nn

from mluverify.device import extensions
from mluverify.device.quantization._modules import LayerSettings, MLUConv1d, MLUConv2d, MLUConv3d, MLULinear
from mluverify.device.quantization._qconfig import QConfig, parse_dtype, parse_qconfig
from mluverify.errors import InvalidArgument


# The device's own float class -> quantized class mapping.
DEVICE_MAPPING: Mapping[type, type] = {nn.Linear: MLULinear, nn.Conv1d: MLUConv1d, nn.Conv2d: MLUConv2d,
                                       nn.Conv3d: MLUConv3d}


def default_mapping() -> dict[type, type]:
    """Float class -> quantized class: the device's own, with what the plugins handed to the
    device return from ``mluverify_quant_mapping`` merged over it (a later plugin wins)."""
    return {**DEVICE_MAPPING, **extensions.plugin_quant_mapping()}


def quantize_dynamic_mlu(model: nn.Module, qconfig_spec: Mapping[str, Any] | None = None,
                         dtype: str | None = None, mapping: Mapping[type, type] | None = None,
                         inplace: bool = False, gen_quant: bool = False) -> nn.Module:
    """Replace the quantizable layers of ``model`` by their MLU quantized classes.

    Layers whose exact type is a key of ``mapping`` (default: ``nn.Linear``, ``nn.Conv1d/2d/3d``
    and what plugins add; a subclass such as ``class IConv(nn.Conv2d)`` is not quantized) are
    replaced by ``mapping[type].from_float(layer, LayerSettings(...))``.

    :param qconfig_spec: the seeds' qconfig dict (``use_avg``, ``data_scale``, ``firstconv``,
        ``mean``, ``std``, ``per_channel``, ``method``, ``iteration``), plus mluverify's
        ``layers``: ``{qualified layer name: 'int8' | 'int16' | None}`` (None keeps it float);
        give the same ``layers`` when calibrating and when building the model that loads the
        checkpoint. A name that is no quantizable layer of ``model`` is an ``InvalidArgument``.
    :param dtype: ``'int8'`` (default) or ``'int16'``.
    :param inplace: modify ``model`` itself instead of a deep copy.
    :param gen_quant: True to calibrate: CPU forward passes then record each layer's input and
        weight scales in ``state_dict()``. False to build a model that loads such a checkpoint.
    """
    qconfig = parse_qconfig(qconfig_spec)
    quant_dtype = parse_dtype(dtype)
    mapping = default_mapping() if mapping is None else dict(mapping)
    if not inplace:
        model = copy.deepcopy(model)
    _check_layer_names(model, mapping, qconfig)
    firstconv = _first_conv_name(model, qconfig) if gen_quant else None
    model = _swap(model, "", mapping, qconfig, quant_dtype, gen_quant, firstconv)
    _keep_quantized_layers_on_the_path(model, tuple(set(mapping.values())))
    return model


# Modules whose inference "fast path" (torch._transformer_encoder_layer_fwd,
# torch._native_multi_head_attention) reads their sub-layers' weights directly instead of
# calling them: a quantized layer inside would never run (nor be calibrated).
_FAST_PATH_MODULES = (nn.TransformerEncoderLayer, nn.MultiheadAttention)


def _keep_quantized_layers_on_the_path(model: nn.Module, quantized: tuple[type, ...]) -> None:
    """Turn torch's MHA fast path off while a fast-path module holding a quantized layer runs,
    so the layer is called (observed when calibrating, quantized on the device)."""
    for module in model.modules():
        if isinstance(module, _FAST_PATH_MODULES) and any(isinstance(m, quantized) for m in module.modules()):
            _without_fast_path(module)


def _without_fast_path(module: nn.Module) -> None:
    previous: list[bool] = []  # a stack: fast-path modules may nest

    def before(_module: nn.Module, _args: tuple) -> None:
        previous.append(torch.backends.mha.get_fastpath_enabled())
        torch.backends.mha.set_fastpath_enabled(False)

    def after(_module: nn.Module, _args: tuple, _output: Any) -> None:
        torch.backends.mha.set_fastpath_enabled(previous.pop())

    module.register_forward_pre_hook(before)
    module.register_forward_hook(after, always_call=True)


def _check_layer_names(model: nn.Module, mapping: Mapping[type, type], qconfig: QConfig) -> None:
    quantizable = {name for name, module in model.named_modules() if type(module) in mapping}
    unknown = sorted(name for name, _ in qconfig.layers if name not in quantizable)
    if unknown:
        raise InvalidArgument(f"qconfig 'layers' names {', '.join(map(repr, unknown))}, not quantizable layers of "
                              f"{type(model).__name__}; quantizable: {', '.join(map(repr, sorted(quantizable)))}")


def _first_conv_name(model: nn.Module, qconfig: QConfig) -> str | None:
    """The layer that normalises raw pixels: the first ``nn.Conv2d`` in module order."""
    if not qconfig.firstconv:
        return None
    for name, module in model.named_modules():
        if type(module) is nn.Conv2d:
            return name
    raise InvalidArgument("qconfig 'firstconv': True but the model has no nn.Conv2d to apply it to; "
                          "set 'firstconv': False")


def _swap(module: nn.Module, name: str, mapping: Mapping[type, type], qconfig: QConfig,
          quant_dtype: str, gen_quant: bool, firstconv: str | None) -> nn.Module:
    quantized_class = mapping.get(type(module))
    if quantized_class is not None:
        layer_dtype = qconfig.layer_dtype(name, quant_dtype)
        if layer_dtype is None:  # kept float by qconfig 'layers'
            return module
        settings = LayerSettings(name or type(module).__name__, qconfig, layer_dtype, gen_quant,
                                 firstconv=name == firstconv)
        return quantized_class.from_float(module, settings)
    for child_name, child in module.named_children():
        qualified = f"{name}.{child_name}" if name else child_name
        setattr(module, child_name, _swap(child, qualified, mapping, qconfig, quant_dtype,
                                          gen_quant, firstconv))
    return module


def quantize_for_target(module: nn.Module, calibration_inputs: Iterable[Any], dtype: str = "int8",
                        per_channel: bool = False) -> nn.Module:
    """A runnable quantized copy of ``module``, calibrated on the CPU, still on the CPU.

    Calibrates a ``gen_quant=True`` copy with one forward pass per element of
    ``calibration_inputs`` (a tensor or a tuple of positional arguments), then loads its
    checkpoint into a fresh ``quantize_dynamic_mlu(module)``, exactly as the seeds' flow does.
    Move the result to ``mlu`` to run it with integer arithmetic.
    """
    batches = [b if isinstance(b, tuple) else (b,) for b in calibration_inputs]
    if not batches:
        raise InvalidArgument("quantize_for_target needs at least one calibration input")
    qconfig = {"per_channel": per_channel, "iteration": len(batches)}
    calibrating = quantize_dynamic_mlu(module, qconfig, dtype=dtype, gen_quant=True)
    with torch.no_grad():
        for batch in batches:
            calibrating(*batch)
    runnable = quantize_dynamic_mlu(module)
    runnable.load_state_dict(calibrating.state_dict())
    return runnable
