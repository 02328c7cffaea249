"""qconfig ``layers``: per-layer dtypes for ``quantize_dynamic_mlu`` (int8 / int16 / None = float)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import mluverify.device  # noqa: F401  (registers "mlu")
from mluverify.device.quantization import MLULinear, quantize_dynamic_mlu
from mluverify.errors import InvalidArgument


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2)))


def test_each_named_layer_gets_its_own_dtype_and_none_keeps_it_float():
    layers = {"0": "int16", "2.1": None}
    calibrating = quantize_dynamic_mlu(_net(), {"layers": layers}, dtype="int8", gen_quant=True)
    with torch.no_grad():
        calibrating(torch.randn(3, 4))
    assert type(calibrating[2][1]) is nn.Linear  # kept float
    modes = {name: int(m.quantized_mode) for name, m in calibrating.named_modules() if isinstance(m, MLULinear)}
    assert modes == {"0": 2, "2.0": 1}  # Cambricon's quantized_mode: 2 int16, 1 int8 (the model-wide dtype)
    runnable = quantize_dynamic_mlu(_net(), {"layers": layers})
    runnable.load_state_dict(calibrating.state_dict())  # the same layers: the checkpoint fits
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = runnable.to("mlu")(x.to("mlu")).cpu()
    # the float layer computes the float function of the int8 layer's output; int16 in layer 0 is
    # within 32767ths of its input range, so the output stays close to the float network's
    assert torch.allclose(out, _net()(x), atol=0.05)


def test_unknown_layer_names_are_named_with_the_quantizable_ones():
    with pytest.raises(InvalidArgument, match=r"names '1', 'fc', not quantizable layers of Sequential; "
                                              r"quantizable: '0', '2.0', '2.1'"):
        quantize_dynamic_mlu(_net(), {"layers": {"fc": "int16", "1": None, "0": "int8"}})


@pytest.mark.parametrize("layers, message", [
    ({"0": "float"}, r"gives layer '0' the dtype 'float'; valid: 'int8', 'int16', None"),
    (["0"], r"'layers' must map layer names to 'int8', 'int16' or None"),
])
def test_bad_layer_dtypes_are_errors(layers, message):
    with pytest.raises(InvalidArgument, match=message):
        quantize_dynamic_mlu(_net(), {"layers": layers})
