"""Quantized layers on the emulated MLU: exact integer arithmetic and accuracy."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn as nn

import mluverify.device  # noqa: F401  (registers the "mlu" device)
from mluverify.judge import assert_close, compare
from mluverify.device.quantization import (
    QMAX, layer_errors, quantize_dynamic_mlu, quantize_for_target)

import quant_reference as reference



@pytest.fixture(autouse=True)
def _inference():
    """Quantized layers are inference-only; a module-level switch would leak into other files."""
    with torch.no_grad():
        yield

LAYERS = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 11)),
    "conv2d": (lambda: nn.Conv2d(4, 6, 3, stride=(2, 1), padding=1, dilation=(1, 2), groups=2), (2, 4, 9, 10)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2, padding=1), (1, 2, 4, 5, 3)),
    "linear": (lambda: nn.Linear(20, 7), (3, 20)),
}


def _gaussian(shape, seed, scale=1.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def _expected(layer, state, x, dtype, out_dtype=np.float32, mean=None, std=None):
    """The numpy int64 reference for ``layer`` with the checkpoint's scales."""
    w = layer.weight.detach().cpu().numpy()
    b = None if layer.bias is None else layer.bias.detach().cpu().numpy()
    input_scale = state["scale"][0].float().item()
    weight_scales = state["scale_weight_per_channel"].float().numpy()
    if isinstance(layer, nn.Linear):
        return reference.quant_linear(x.numpy(), w, b, input_scale, weight_scales, QMAX[dtype], out_dtype)
    return reference.quant_conv(x.numpy(), w, b, layer.stride, layer.padding, layer.dilation, layer.groups,
                                input_scale, weight_scales, QMAX[dtype], mean, std, out_dtype)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("kind", list(LAYERS))
def test_device_output_equals_the_int64_reference(kind, dtype, per_channel):
    make, shape = LAYERS[kind]
    torch.manual_seed(0)
    layer = make().eval()
    # Run on a wider input than calibrated, so clamping to +-qmax is exercised too.
    quantized = quantize_for_target(layer, [_gaussian(shape, 1)], dtype=dtype, per_channel=per_channel)
    state = {k.split(".")[-1]: v.clone() for k, v in quantized.state_dict().items()}
    x = _gaussian(shape, 2, scale=1.5)
    actual = quantized.to("mlu")(x.to("mlu")).cpu()
    np.testing.assert_array_equal(actual.numpy(), _expected(layer, state, x, dtype))


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_float16_activations_equal_the_reference(dtype):
    torch.manual_seed(0)
    layer = nn.Conv2d(3, 5, 3, padding=1).eval()
    quantized = quantize_for_target(layer, [_gaussian((1, 3, 8, 8), 1)], dtype=dtype).half()
    state = {k.split(".")[-1]: v.clone() for k, v in quantized.state_dict().items()}
    x = _gaussian((1, 3, 8, 8), 2).half()
    actual = quantized.to("mlu")(x.to("mlu")).cpu()
    assert actual.dtype == torch.float16
    np.testing.assert_array_equal(actual.numpy(), _expected(quantized, state, x, dtype, np.float16))


def test_firstconv_normalises_raw_pixels_on_the_device():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1)).eval()
    mean, std = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]
    pixels = torch.randint(0, 256, (1, 3, 6, 6), generator=torch.Generator().manual_seed(3)).float()
    normalised = (pixels / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    calibrating = quantize_dynamic_mlu(net, {"firstconv": True, "mean": mean, "std": std}, gen_quant=True)
    calibrating(normalised)
    runnable = quantize_dynamic_mlu(net)
    runnable.load_state_dict(calibrating.state_dict())
    state = {k.split(".")[-1]: v.clone() for k, v in runnable.state_dict().items()}
    actual = runnable.to("mlu")(pixels.to("mlu")).cpu()
    expected = _expected(net[0], state, pixels, "int8",
                         mean=np.float32(mean) * np.float32(255), std=np.float32(std) * np.float32(255))
    np.testing.assert_array_equal(actual.numpy(), expected)
    assert compare(actual, net(normalised), mode="cnml").passed


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(16 * 8 * 8, 10)).eval()


@pytest.mark.parametrize("dtype,mode", [("int8", "cnml"), ("int16", "cnnl")])
def test_gaussian_inputs_stay_within_2_percent_int8_and_0_3_percent_int16(dtype, mode):
    # cnml bounds rel_mse by 0.02 (the int8 rule), cnnl by 0.003 (the int16 rule).
    net = _cnn()
    calibration = [_gaussian((4, 3, 8, 8), seed) for seed in range(4)]
    quantized = quantize_for_target(net, calibration, dtype=dtype).to("mlu")
    x = _gaussian((4, 3, 8, 8), 10)
    verdict = assert_close(quantized(x.to("mlu")).cpu(), net(x), mode=mode)
    assert verdict.value > 0  # quantized, not the float result


class ChannelOutlier(nn.Module):
    """Multiplies channel 0 by 100: the next layer sees an outlier-heavy input."""

    def forward(self, x):
        return x * torch.tensor([100.0] + [1.0] * (x.shape[-1] - 1), dtype=x.dtype, device=x.device)


def _outlier_net():
    # The outlier sets the per-tensor int8 step (~100 * 3 sigma / 127, 2.4 sigma): the other
    # 511 channels round to a few levels, an error of several percent of the output energy.
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(clean=nn.Linear(32, 512), outlier=ChannelOutlier(),
                                     hit=nn.Linear(512, 16))).eval()


def test_outlier_heavy_input_exceeds_2_percent_and_layer_errors_names_the_layer():
    net = _outlier_net()
    quantized = quantize_for_target(net, [_gaussian((8, 32), 1)], dtype="int8").to("mlu")
    x = _gaussian((8, 32), 2)
    assert not compare(quantized(x.to("mlu")).cpu(), net(x), mode="cnml").passed
    errors = layer_errors(net, quantized, x)
    assert errors["layer"].tolist() == ["clean", "hit"]
    culprits = errors.loc[errors["rel_mse"] > 0.02, "layer"].tolist()
    assert culprits == ["hit"]
    assert errors.set_index("layer").loc["hit", "sqnr_db"] < errors.set_index("layer").loc["clean", "sqnr_db"]
    # The outlier is a per-tensor int8 problem: int16 steps are 258 times finer.
    int16 = quantize_for_target(net, [_gaussian((8, 32), 1)], dtype="int16").to("mlu")
    assert (layer_errors(net, int16, x)["rel_mse"] < 0.02).all()


def test_an_outlier_heavy_model_input_exceeds_2_percent_with_per_tensor_int8():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(512, 16)).eval()
    outlier_heavy = ChannelOutlier()(_gaussian((8, 512), 1))
    quantized = quantize_for_target(net, [outlier_heavy], dtype="int8").to("mlu")
    verdict = compare(quantized(outlier_heavy.to("mlu")).cpu(), net(outlier_heavy), mode="cnml")
    assert not verdict.passed and verdict.value > 0.02


def test_layer_errors_sees_outputs_before_an_inplace_relu():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(inplace=True), nn.Linear(64, 8)).eval()
    quantized = quantize_for_target(net, [_gaussian((8, 32), 1)], dtype="int16").to("mlu")
    errors = layer_errors(net, quantized, _gaussian((8, 32), 1))
    assert (errors["rel_mse"] < 0.003).all()  # the float side must not be the ReLU'd output


def test_layer_errors_works_for_float16():
    net = _outlier_net()
    quantized = quantize_for_target(net, [_gaussian((8, 32), 1)], dtype="int8").half().to("mlu")
    errors = layer_errors(net.half(), quantized, _gaussian((8, 32), 2).half())
    assert errors["dtype"].tolist() == ["float16", "float16"]
    clean = errors.set_index("layer").loc["clean"]
    assert 0 < clean["rel_mse"] < 0.02 and 0.99 < clean["cosine"] <= 1


def test_a_model_without_quantization_parameters_refuses_to_run_on_the_device():
    runnable = quantize_dynamic_mlu(_cnn()).to("mlu")
    with pytest.raises(ValueError, match=r"layer '0' has no quantization parameters"):
        runnable(_gaussian((1, 3, 8, 8), 1).to("mlu"))
