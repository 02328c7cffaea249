"""Quantized layers inside modules with a fused inference fast path (TransformerEncoderLayer,
MultiheadAttention) are calibrated and run quantized: the fast path, which reads their weights
directly instead of calling them, is off while such a module runs, and back on afterwards."""
import pytest
import torch

import mluverify.device  # noqa: F401  registers the device
from mluverify.judge import compare
from mluverify.device.quantization import quantize_dynamic_mlu, quantize_for_target


@pytest.fixture
def encoder_layer():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 4, 256, batch_first=True).eval()


def test_calibration_observes_the_layers_behind_the_fast_path(encoder_layer):
    x = torch.randn(2, 10, 64)
    quantized = quantize_for_target(encoder_layer, [x], dtype="int16")
    scales = {k: v for k, v in quantized.state_dict().items() if k.endswith(".scale")}
    assert set(scales) == {"linear1.scale", "linear2.scale"}
    # input scale = qmax / absmax of what the layer saw (32767 / absmax): not the uncalibrated 1.0
    with torch.no_grad():
        hidden = encoder_layer.norm1(x + encoder_layer.self_attn(x, x, x, need_weights=False)[0])
    assert scales["linear1.scale"][0].item() == pytest.approx(32767 / hidden.abs().max().item(), rel=1e-5)


def test_the_device_runs_them_quantized_and_the_fast_path_comes_back(encoder_layer):
    x = torch.randn(2, 10, 64)
    quantized = quantize_for_target(encoder_layer, [x], dtype="int16").to("mlu")
    assert torch.backends.mha.get_fastpath_enabled()
    with torch.no_grad():
        expected = encoder_layer(x)
        actual = quantized(x.to("mlu")).cpu()
    verdict = compare(actual, expected, mode="cnnl")
    assert verdict.passed and verdict.value > 0  # int16 rounding shows: the layers did run quantized
    assert torch.backends.mha.get_fastpath_enabled()


def test_a_model_without_quantized_layers_keeps_its_hooks_empty():
    attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    quantized = quantize_dynamic_mlu(attention)  # out_proj is a Linear subclass: not quantized
    assert not quantized._forward_pre_hooks and not quantized._forward_hooks
