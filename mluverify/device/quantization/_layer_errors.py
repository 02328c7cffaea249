"""Per-layer accuracy of a quantized model against its float original (torch.ao.ns style)."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
import torch.nn as nn

COLUMNS = ("layer", "type", "shape", "dtype", "rel_mse", "sqnr_db", "cosine")


def layer_errors(float_model: nn.Module, quantized_model: nn.Module, inputs: Any) -> "pandas.DataFrame":
    """One row per quantized layer, in execution order: its output against the float layer's.

    A quantized layer is a module of ``quantized_model`` whose class differs from the module of
    the same name in ``float_model``. Both models run on ``inputs`` (a tensor or a tuple of
    positional arguments, moved to each model's device); each layer's output (first call) is
    compared with ``mluverify.judge.metrics`` in float64, so float16 models work too. The
    errors accumulate through the network: the first layer whose ``rel_mse`` jumps is the one
    that loses accuracy.
    """
    import pandas as pd

    from mluverify.judge import metrics

    names = _swapped_layers(float_model, quantized_model)
    expected = _layer_outputs(float_model, names, inputs)
    actual = _layer_outputs(quantized_model, names, inputs)
    rows = []
    for name, output in actual.items():
        scores = metrics(output, expected[name])
        rows.append({"layer": name, "type": type(quantized_model.get_submodule(name)).__name__,
                     "shape": tuple(output.shape), "dtype": str(output.dtype).replace("torch.", ""),
                     **{key: scores[key] for key in ("rel_mse", "sqnr_db", "cosine")}})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _swapped_layers(float_model: nn.Module, quantized_model: nn.Module) -> list[str]:
    float_layers = dict(float_model.named_modules())
    return [name for name, module in quantized_model.named_modules()
            if name in float_layers and type(float_layers[name]) is not type(module)]


def _layer_outputs(model: nn.Module, names: list[str], inputs: Any) -> dict[str, torch.Tensor]:
    """The first output of each named layer during one forward pass, on the CPU."""
    device = _device_of(model)
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    outputs: dict[str, torch.Tensor] = {}
    with _capturing(model, names, outputs), torch.no_grad():
        model(*args)
    return outputs


@contextlib.contextmanager
def _capturing(model: nn.Module, names: list[str], outputs: dict) -> Iterator[None]:
    def hook_for(name: str):
        def capture(module, args, output):
            if name not in outputs and isinstance(output, torch.Tensor):
                # A copy even on the CPU: an in-place op (ReLU(inplace=True)) may follow.
                outputs[name] = output.detach().to("cpu", copy=True)
        return capture

    handles = [model.get_submodule(name).register_forward_hook(hook_for(name)) for name in names]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _device_of(model: nn.Module) -> torch.device:
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")
