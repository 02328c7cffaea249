"""adaptive_quantize: the device's quantized forward and backward kernels against an independent
integer reference (numpy), the layers against the CPU's float autograd, the scale schedule
against a hand-derived one, and the bad-input contract."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import mluverify.device as md
from mluverify.judge import metrics
from mluverify.device.quantization import AdaptiveConv2d, AdaptiveLinear, ScaleSchedule, adaptive_quantize

import integer_reference as ref

QMAX = {8: 127, 16: 32767, 31: 2 ** 30 - 1}
BOUND = {8: 0.02, 16: 0.003, 31: 0.003}  # int8: the cnml (quantized) bound; wider: the cnnl one
g = torch.Generator().manual_seed(0)


def r(*shape):
    return torch.randn(*shape, generator=g)


def _scale(t: torch.Tensor, qmax: int) -> float:
    return qmax / float(t.abs().max())


def _assert_matches_reference(got: torch.Tensor, expected: np.ndarray, bitwidth: int) -> None:
    """Bit for bit for 8 and 16 bits; for 31 bits the device sums its int16 halves in float64,
    so the float32 result may differ from the exact one by one ulp."""
    got = got.cpu().numpy()
    assert got.shape == expected.shape
    if bitwidth < 31:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_array_max_ulp(got, expected, maxulp=1)


# (input shape, weight shape, stride, padding, dilation, groups)
CONV_CASES = {
    "plain": ((2, 4, 9, 9), (6, 4, 3, 3), 1, 0, 1, 1),
    "stride-pad-dilation-groups": ((2, 4, 9, 9), (6, 2, 3, 3), 2, 1, 2, 2),
    # int8 sums beyond 2**24, which the device slices into float32-exact parts: 120 channels x 9
    # taps x 127**2 (forward and input gradient); 5 images x 256 positions (weight gradient)
    "deep-channels": ((1, 120, 3, 3), (120, 120, 3, 3), 1, 0, 1, 1),
    "deep-batch": ((5, 1, 18, 18), (1, 1, 3, 3), 1, 0, 1, 1),
}
CONV_PARAMS = [(name, bits) for name in CONV_CASES for bits in (8, 16, 31) if not name.startswith("deep") or bits == 8]


@pytest.mark.parametrize("name, bitwidth", CONV_PARAMS)
def test_conv_kernels_match_the_integer_reference(name, bitwidth):
    qmax = QMAX[bitwidth]
    x_shape, w_shape, s, p, d, groups = CONV_CASES[name]
    x, w, bias = r(*x_shape), r(*w_shape), r(w_shape[0])
    conv_args = ([s] * 2, [p] * 2, [d] * 2, groups)
    y = F.conv2d(x, w, None, *conv_args)
    grad = r(*y.shape)
    sx, sw, sg = _scale(x, qmax), _scale(w, qmax), _scale(grad, qmax)
    with md.track_fallbacks() as fallbacks:
        out = torch.ops.mluverify.adaptive_conv(x.to("mlu"), w.to("mlu"), bias.to("mlu"), *conv_args, sx, sw, qmax)
        grad_x, grad_w = torch.ops.mluverify.adaptive_conv_backward(
            grad.to("mlu"), x.to("mlu"), w.to("mlu"), *conv_args, sx, sw, sg, qmax, True, True)
    assert fallbacks.ops == ()
    qx, qw, qg = (ref.quantize(t.numpy(), scale, qmax) for t, scale in ((x, sx), (w, sw), (grad, sg)))
    _assert_matches_reference(out, ref.dequantize(ref.conv2d(qx, qw, s, p, d, groups), sx, sw, bias.numpy()), bitwidth)
    _assert_matches_reference(
        grad_x, ref.dequantize(ref.conv2d_input_grad(qg, qw, x.shape, s, p, d, groups), sg, sw), bitwidth)
    _assert_matches_reference(
        grad_w, ref.dequantize(ref.conv2d_weight_grad(qx, qg, w.shape, s, p, d, groups), sx, sg), bitwidth)


@pytest.mark.parametrize("bitwidth", [8, 16, 31])
def test_linear_kernels_match_the_integer_reference(bitwidth):
    qmax = QMAX[bitwidth]
    x, w, bias, grad = r(2, 3, 7), r(5, 7), r(5), r(2, 3, 5)
    sx, sw, sg = _scale(x, qmax), _scale(w, qmax), _scale(grad, qmax)
    out = torch.ops.mluverify.adaptive_linear(x.to("mlu"), w.to("mlu"), bias.to("mlu"), sx, sw, qmax)
    grad_x, grad_w = torch.ops.mluverify.adaptive_linear_backward(
        grad.to("mlu"), x.to("mlu"), w.to("mlu"), sx, sw, sg, qmax, True, True)
    qx, qw, qg = (ref.quantize(t.numpy(), s, qmax) for t, s in ((x, sx), (w, sw), (grad, sg)))
    _assert_matches_reference(out, ref.dequantize(qx @ qw.T, sx, sw, bias.numpy(), channel_axis=-1), bitwidth)
    _assert_matches_reference(grad_x, ref.dequantize(qg @ qw, sg, sw), bitwidth)
    rows_g, rows_x = qg.reshape(-1, 5), qx.reshape(-1, 7)
    _assert_matches_reference(grad_w, ref.dequantize(rows_g.T @ rows_x, sg, sx), bitwidth)


@pytest.mark.parametrize("x_shape, w_shape", [((4, 1100), (3, 1100)), ((4, 3), (1100, 3)), ((1100, 2), (3, 2))],
                         ids=["inputs", "outputs", "rows"])
def test_int8_linear_deeper_than_float32_exactness_stays_exact(x_shape, w_shape):
    """1100 summed products of int8 values exceed 2**24 in the worst case: the forward (over
    inputs), the input gradient (over outputs) and the weight gradient (over rows) are sliced,
    and still bit-exact."""
    qmax = QMAX[8]
    x, w = r(*x_shape), r(*w_shape)
    grad = r(x_shape[0], w_shape[0])
    sx, sw, sg = _scale(x, qmax), _scale(w, qmax), _scale(grad, qmax)
    out = torch.ops.mluverify.adaptive_linear(x.to("mlu"), w.to("mlu"), None, sx, sw, qmax)
    grad_x, grad_w = torch.ops.mluverify.adaptive_linear_backward(
        grad.to("mlu"), x.to("mlu"), w.to("mlu"), sx, sw, sg, qmax, True, True)
    qx, qw, qg = (ref.quantize(t.numpy(), scale, qmax) for t, scale in ((x, sx), (w, sw), (grad, sg)))
    _assert_matches_reference(out, ref.dequantize(qx @ qw.T, sx, sw), 8)
    _assert_matches_reference(grad_x, ref.dequantize(qg @ qw, sg, sw), 8)
    _assert_matches_reference(grad_w, ref.dequantize(qg.T @ qx, sg, sx), 8)


def _layer_gradients(layer: nn.Module, x: torch.Tensor, upstream: torch.Tensor, device: str):
    layer = copy.deepcopy(layer).to(device)
    leaf = x.detach().to(device).requires_grad_()
    out = layer(leaf)
    out.backward(upstream.to(device))
    return [t.detach().cpu() for t in (out, leaf.grad, layer.weight.grad, layer.bias.grad)]


@pytest.mark.parametrize("bitwidth", [8, 16, 31])
@pytest.mark.parametrize("float_layer, shape", [(nn.Conv2d(3, 8, 3, padding=1), (4, 3, 10, 10)),
                                                (nn.Linear(32, 16), (8, 32))], ids=["conv2d", "linear"])
def test_adaptive_layer_on_device_against_cpu_float_autograd(bitwidth, float_layer, shape):
    """Output and every gradient within the bound of the precision: int8 within the quantized
    (cnml) bound, 16 and 31 bits within the cnnl bound; each differs from float."""
    torch.manual_seed(0)
    x = torch.randn(shape)
    upstream = torch.randn(float_layer(x).shape)
    expected = _layer_gradients(float_layer, x, upstream, "cpu")
    adaptive = adaptive_quantize(float_layer, steps_per_epoch=10, bitwidth=bitwidth)
    got = _layer_gradients(adaptive, x, upstream, "mlu")
    for name, got_t, expected_t in zip(("output", "grad_input", "grad_weight", "grad_bias"), got, expected):
        judged = metrics(got_t, expected_t)
        assert judged["rel_mse"] <= BOUND[bitwidth], f"{name}: {judged['rel_mse']:.2e}"
        if name != "grad_bias":  # the bias gradient is a float sum, not quantized
            assert judged["max_abs"] > 0, f"{name} is the float result: nothing was quantized"


def test_on_the_cpu_an_adaptive_model_computes_in_float():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3)
    x = torch.randn(1, 2, 6, 6)
    adaptive = adaptive_quantize(nn.Sequential(conv), steps_per_epoch=4)
    torch.testing.assert_close(adaptive(x), conv(x), rtol=0, atol=0)


# --------------------------------------------------------------------------------------------
# the schedule
# --------------------------------------------------------------------------------------------

# steps_per_epoch = 40: interval cap 40 // 8 = 5; within an epoch the scales are re-estimated
# at positions 0, 1 (+1), 3 (+2), 7 (+4), 12, 17, 22, 27, 32, 37 (+5 each); then 40, 41, 43, ...
POSITIONS_40 = {0, 1, 3, 7, 12, 17, 22, 27, 32, 37}
# steps run -> the last step (0-based) at which the scales were re-estimated
LAST_UPDATE_40 = {1: 0, 2: 1, 3: 1, 4: 3, 8: 7, 12: 7, 13: 12, 40: 37, 41: 40, 44: 43}


def test_schedule_positions_are_the_hand_derived_ones():
    assert ScaleSchedule(40).positions == POSITIONS_40
    assert ScaleSchedule(1).positions == {0}  # every step
    assert ScaleSchedule(7).positions == set(range(7))  # cap 1: every step
    assert ScaleSchedule(100).positions == {0, 1, 3, 7, 15, 27, 39, 51, 63, 75, 87, 99}  # cap 12


def _train_steps(layer: AdaptiveLinear, steps: int) -> None:
    """Step t sees input absmax t+1, weight absmax 0.1 (t+1), output-gradient absmax 0.01 (t+1)."""
    pattern = torch.tensor([[1.0, -0.5, 0.25, -1.0], [0.5, 0.0, -0.75, 0.125]])
    weight = torch.tensor([[1.0, -0.5, 0.0, 0.25], [0.5, -1.0, 0.75, 0.0], [0.0, 0.125, -0.25, 0.5]])
    for t in range(steps):
        with torch.no_grad():
            layer.weight.copy_((weight * 0.1 * (t + 1)).to("mlu"))
        out = layer(pattern.to("mlu") * (t + 1))
        out.backward(torch.full(out.shape, -0.01 * (t + 1)).to("mlu"))


@pytest.mark.parametrize("steps", sorted(LAST_UPDATE_40))
def test_scales_after_k_steps_follow_the_hand_derived_schedule(steps):
    model = adaptive_quantize(nn.Sequential(nn.Linear(4, 3)), steps_per_epoch=40, bitwidth=8).to("mlu")
    layer = model[0]
    _train_steps(layer, steps)
    u = LAST_UPDATE_40[steps] + 1  # the absmax factor of the step of the last re-estimation
    expected = torch.tensor([127 / u, 127 / (0.1 * u), 127 / (0.01 * u)], dtype=torch.float32)
    torch.testing.assert_close(layer.adaptive_scales.cpu(), expected, rtol=1e-6, atol=0)
    assert int(layer.adaptive_step) == steps


def test_eval_and_no_grad_forwards_are_not_training_steps():
    model = adaptive_quantize(nn.Sequential(nn.Linear(4, 3)), steps_per_epoch=40).to("mlu")
    _train_steps(model[0], 2)
    scales = model[0].adaptive_scales.cpu().clone()
    model.eval()
    model(torch.full((2, 4), 100.0).to("mlu"))
    model.train()
    with torch.no_grad():
        model(torch.full((2, 4), 100.0).to("mlu"))
    assert int(model[0].adaptive_step) == 2
    torch.testing.assert_close(model[0].adaptive_scales.cpu(), scales, rtol=0, atol=0)


def test_a_value_beyond_the_estimated_range_saturates_until_the_next_estimate():
    """Step 2 is not a re-estimation step: its input (10x the range estimated at step 1) is
    clamped to qmax, so the output is that of the clamped input."""
    model = adaptive_quantize(nn.Sequential(nn.Linear(1, 1, bias=False)), steps_per_epoch=40).to("mlu")
    with torch.no_grad():
        model[0].weight.fill_(1.0)
    for value in (1.0, 2.0):
        model(torch.tensor([[value]]).to("mlu")).sum().backward()
    out = model(torch.tensor([[20.0]]).to("mlu"))
    assert float(out.detach()) == pytest.approx(2.0, rel=1e-6)


def test_schedule_state_is_in_the_state_dict_and_scales_stay_float32():
    model = adaptive_quantize(nn.Sequential(nn.Conv2d(1, 2, 3)), steps_per_epoch=5)
    model(torch.randn(1, 1, 5, 5)).sum().backward()
    state = model.state_dict()
    assert {"0.adaptive_step", "0.adaptive_scales"} <= set(state)
    assert int(state["0.adaptive_step"]) == 1 and bool((state["0.adaptive_scales"] > 0).all())
    assert model.half()[0].adaptive_scales.dtype == torch.float32


def test_adaptive_layers_replace_exact_types_only_and_share_parameters():
    class IConv(nn.Conv2d):
        pass

    net = nn.Sequential(nn.Conv2d(1, 2, 3), IConv(2, 2, 1), nn.Linear(2, 2), nn.ReLU())
    quantized = adaptive_quantize(net, steps_per_epoch=3, bitwidth=16, inplace=True)
    assert quantized is net
    assert [type(m) for m in net] == [AdaptiveConv2d, IConv, AdaptiveLinear, nn.ReLU]
    assert net[0].bitwidth == 16 and net[0].qmax == 32767
    copied = adaptive_quantize(nn.Sequential(nn.Linear(2, 2)), steps_per_epoch=3)
    assert type(copied[0]) is AdaptiveLinear


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bitwidth", [4, 32, True, "8", 8.0])
def test_bitwidth_outside_8_16_31_is_rejected_naming_the_valid_values(bitwidth):
    with pytest.raises(ValueError, match=r"'bitwidth' must be one of 8, 16, 31; got"):
        adaptive_quantize(nn.Linear(2, 2), steps_per_epoch=3, bitwidth=bitwidth)


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, None])
def test_steps_per_epoch_below_one_is_rejected(steps):
    with pytest.raises(ValueError, match=r"'steps_per_epoch' must be an integer >= 1"):
        adaptive_quantize(nn.Linear(2, 2), steps_per_epoch=steps)


def test_model_must_be_a_module():
    with pytest.raises(TypeError, match=r"'model' must be a torch.nn.Module, got \[1\] \(type=list\)"):
        adaptive_quantize([1], steps_per_epoch=3)


def test_model_without_quantizable_layers_warns_and_is_returned_unchanged():
    net = nn.Sequential(nn.ReLU(), nn.BatchNorm1d(3))
    with pytest.warns(UserWarning, match="Sequential has no nn.Linear or nn.Conv1d/2d/3d layer"):
        quantized = adaptive_quantize(net, steps_per_epoch=3)
    assert [type(m) for m in quantized] == [nn.ReLU, nn.BatchNorm1d]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adaptive_quantize(nn.Linear(2, 2), steps_per_epoch=3)
