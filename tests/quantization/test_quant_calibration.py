"""Calibration (gen_quant=True), the checkpoint layout and loading it (on the CPU)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from mluverify import hookimpl
from mluverify.device.quantization import (
    MLUConv1d, MLUConv2d, MLUConv3d, MLULinear, quantize_dynamic_mlu, quantize_for_target)
from mluverify.core.plugin_manager import configured_plugin_manager


class IConv(nn.Conv2d):
    """The seeds' example of a custom subclass: it must not be quantized."""


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.iconv = IConv(4, 4, 1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
        self.conv1d = nn.Conv1d(2, 3, 2)
        self.conv3d = nn.Conv3d(1, 2, 2)

    def forward(self, x):
        return self.head(self.iconv(torch.relu(self.conv(x))))


def _net():
    torch.manual_seed(0)
    return Net().eval()


def _input(seed=1, scale=1.0):
    return torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(seed)) * scale


def _calibrated(net, inputs, spec=None, dtype="int8"):
    qnet = quantize_dynamic_mlu(net, spec, dtype=dtype, gen_quant=True)
    with torch.no_grad():
        for x in inputs:
            qnet(x)
    return qnet


def test_exact_float_types_are_replaced_and_subclasses_kept():
    qnet = quantize_dynamic_mlu(_net())
    assert type(qnet.conv) is MLUConv2d and type(qnet.head[1]) is MLULinear
    assert type(qnet.conv1d) is MLUConv1d and type(qnet.conv3d) is MLUConv3d
    assert type(qnet.iconv) is IConv


def test_a_deep_copy_unless_inplace():
    net = _net()
    copy = quantize_dynamic_mlu(net)
    assert type(net.conv) is nn.Conv2d and copy is not net
    same = quantize_dynamic_mlu(net, inplace=True)
    assert same is net and type(net.conv) is MLUConv2d


def test_mapping_argument_replaces_the_default():
    qnet = quantize_dynamic_mlu(_net(), mapping={nn.Linear: MLULinear})
    assert type(qnet.conv) is nn.Conv2d and type(qnet.head[1]) is MLULinear


class PluginLinear(MLULinear):
    """A third party's quantized linear class."""


class LinearPlugin:
    @hookimpl
    def mluverify_quant_mapping(self):
        return {nn.Linear: PluginLinear}


def test_a_plugin_mapping_overrides_the_built_in_one():
    with configured_plugin_manager([LinearPlugin()], entry_points=False):
        qnet = quantize_dynamic_mlu(_net())
    assert type(quantize_dynamic_mlu(_net()).head[1]) is MLULinear  # the run ended: the device's own again
    assert type(qnet.head[1]) is PluginLinear and type(qnet.conv) is MLUConv2d


def test_on_the_cpu_a_quantized_model_computes_in_float():
    net, x = _net(), _input()
    with torch.no_grad():
        assert torch.equal(_calibrated(net, [x])(x), net(x))


@pytest.mark.parametrize("dtype,qmax,mode", [("int8", 127, 1), ("int16", 32767, 2)])
def test_scales_are_qmax_over_the_absmax_of_input_and_weight(dtype, qmax, mode):
    net, x = _net(), _input()
    state = _calibrated(net, [x], dtype=dtype).state_dict()
    conv_out = torch.relu(net.conv(x))  # the input of iconv; head[1] sees iconv's output
    head_input = net.iconv(conv_out).flatten(1)
    assert state["conv.scale"].tolist() == pytest.approx(
        [qmax / x.abs().max().item(), qmax / net.conv.weight.abs().max().item()], rel=1e-6)
    assert state["head.1.scale"].tolist() == pytest.approx(
        [qmax / head_input.abs().max().item(), qmax / net.head[1].weight.abs().max().item()], rel=1e-6)
    assert state["conv.quantized_mode"].tolist() == [mode]
    assert torch.equal(state["conv.scale_weight_per_channel"], state["conv.scale"][1].expand(4))
    assert "iconv.scale" not in state


@pytest.mark.parametrize("dtype,qmax,mode", [("int8", 127, 3), ("int16", 32767, 4)])
def test_per_channel_weight_scales(dtype, qmax, mode):
    net, x = _net(), _input()
    state = _calibrated(net, [x], {"per_channel": True}, dtype=dtype).state_dict()
    expected = [qmax / net.conv.weight[o].abs().max().item() for o in range(4)]
    assert state["conv.scale_weight_per_channel"].tolist() == pytest.approx(expected, rel=1e-6)
    assert state["conv.quantized_mode"].tolist() == [mode]
    assert state["conv.scale"][1].item() == pytest.approx(min(expected), rel=1e-6)


def test_a_zero_range_gives_scale_one():
    state = _calibrated(_net(), [torch.zeros(1, 3, 6, 6)]).state_dict()
    assert state["conv.scale"][0].item() == 1.0


def _input_absmax(spec, passes):
    layer = _calibrated(nn.Sequential(nn.Linear(2, 2)), passes, spec)[0]
    return 127 / layer.scale[0].item()


PASSES = [torch.tensor([[-1.0, 2.0]]), torch.tensor([[-6.0, 3.0]]), torch.tensor([[-50.0, 50.0]])]


def test_min_max_keep_the_extremes_of_the_observed_passes():
    assert _input_absmax({"iteration": 2}, PASSES[:2]) == pytest.approx(6.0)


def test_use_avg_averages_minima_and_maxima():
    # mean min = (-1 - 6) / 2 = -3.5, mean max = 2.5 -> absmax 3.5
    assert _input_absmax({"iteration": 2, "use_avg": True}, PASSES[:2]) == pytest.approx(3.5)


def test_data_scale_scales_the_range():
    assert _input_absmax({"iteration": 2, "data_scale": 0.5}, PASSES[:2]) == pytest.approx(3.0)


def test_passes_after_iteration_are_ignored_with_a_warning():
    with pytest.warns(UserWarning, match="iteration"):
        assert _input_absmax({"iteration": 2}, PASSES) == pytest.approx(6.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_in_calibration_names_the_layer_and_writes_no_scale(bad):
    net = _net()
    net.iconv.weight.data[0, 0] = bad  # iconv stays float: head.1 receives the NaN/Inf
    qnet = quantize_dynamic_mlu(net, gen_quant=True)
    with pytest.raises(ValueError, match=r"input of layer 'head\.1'.*NaN/Inf"), torch.no_grad():
        qnet(_input())
    assert torch.isfinite(qnet.state_dict()["head.1.scale"]).all()
    assert not qnet.head[1].has_qparams


def test_nan_weight_names_the_layer():
    net = _net()
    net.conv.weight.data[1, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"weight of layer 'conv'"):
        _calibrated(net, [_input()])


def test_a_runnable_model_loads_the_checkpoint():
    net, x = _net(), _input()
    state = _calibrated(net, [x], {"per_channel": True}, dtype="int16").state_dict()
    runnable = quantize_dynamic_mlu(net)
    runnable.load_state_dict(state)
    assert all(torch.equal(runnable.state_dict()[k], v) for k, v in state.items())
    assert runnable.conv.has_qparams and runnable.conv.observer is None


def test_loading_a_float_checkpoint_names_the_missing_quantization_keys():
    runnable = quantize_dynamic_mlu(_net())
    with pytest.raises(RuntimeError, match=r"layer 'conv': conv\.scale, conv\.quantized_mode"):
        runnable.load_state_dict(_net().state_dict(), strict=False)


def test_a_per_tensor_checkpoint_without_channel_scales_loads():
    # Cambricon's own tool writes no per-channel vector for per-tensor layers.
    net = _net()
    state = _calibrated(net, [_input()]).state_dict()
    for key in [k for k in state if k.endswith("scale_weight_per_channel")]:
        del state[key]
    runnable = quantize_dynamic_mlu(net)
    runnable.load_state_dict(state)
    assert torch.equal(runnable.conv.scale_weight_per_channel, runnable.conv.scale[1].expand(4))


def test_firstconv_stores_mean_and_std_times_255_in_the_first_conv_only():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Conv2d(2, 2, 1))
    qnet = _calibrated(net, [torch.rand(1, 1, 5, 5)], {"firstconv": True, "mean": [0.25], "std": [0.5]})
    state = qnet.state_dict()
    assert state["0.input_mean"].tolist() == [63.75] and state["0.input_std"].tolist() == [127.5]
    assert "1.input_mean" not in state
    runnable = quantize_dynamic_mlu(net)
    runnable.load_state_dict(state)
    assert runnable[0].input_std.tolist() == [127.5]


def test_quantize_for_target_calibrates_on_every_input():
    net = nn.Sequential(nn.Linear(2, 2))
    runnable = quantize_for_target(net, PASSES, dtype="int16")
    assert runnable[0].scale[0].item() == pytest.approx(32767 / 50.0)
    assert runnable[0].observer is None and runnable[0].has_qparams
