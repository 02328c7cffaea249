"""Backward on the device: every backward kernel of the training set runs on ``mlu`` (no CPU
fallback) and is the op autograd really reaches; with products computed as the CPU does
(matmul precision ``float``) its gradients are the CPU autograd's, and under the default
profile (MLU270: the matmul class quantized to int16) they stay within the ``cnnl`` bound
(rel_mse <= 0.3 %, seed 003) in float32 and float16. The convolution backward's quantized
products are checked against an independent integer reference, its MLU370 products against
TF32 rounding."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import mluverify.device as md
from mluverify.judge import metrics
from mluverify.device import mlu_model
from mluverify.device.numerics import numerics_settings
from mluverify.device import backward_kernels as plugin

import integer_reference as ref

CNNL_BOUND = 0.003
g = torch.Generator().manual_seed(0)


def r(*shape):
    return torch.randn(*shape, generator=g)


def labels(high, *shape):
    return torch.randint(0, high, shape, generator=g)


# name -> (callable, inputs, the backward op autograd must reach on the device)
CASES = {
    "conv1d": (nn.Conv1d(4, 6, 3, padding=1), (r(2, 4, 10),), "convolution_backward"),
    "conv2d_stride_groups_dilation": (nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2, dilation=2),
                                      (r(2, 4, 11, 11),), "convolution_backward"),
    "conv3d": (nn.Conv3d(2, 3, 3), (r(1, 2, 5, 5, 5),), "convolution_backward"),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1), (r(1, 4, 5, 5),),
                         "convolution_backward"),
    "linear": (nn.Linear(7, 5), (r(3, 7),), "mm"),
    "linear_3d": (nn.Linear(7, 5), (r(2, 3, 7),), "mm"),
    "bmm": (torch.bmm, (r(2, 3, 4), r(2, 4, 5)), "bmm"),
    "matmul": (torch.matmul, (r(2, 3, 4), r(4, 6)), "mm"),
    "relu": (torch.relu, (r(10),), "threshold_backward"),
    "relu6": (F.relu6, (r(10) * 5,), "hardtanh_backward"),
    "leaky_relu": (F.leaky_relu, (r(10),), "leaky_relu_backward"),
    "sigmoid": (torch.sigmoid, (r(10),), "sigmoid_backward"),
    "tanh": (torch.tanh, (r(10),), "tanh_backward"),
    "gelu": (F.gelu, (r(10),), "gelu_backward"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), (r(10),), "gelu_backward"),
    "elu": (F.elu, (r(10),), "elu_backward"),
    "hardswish": (F.hardswish, (r(10) * 4,), "hardswish_backward"),
    "hardsigmoid": (F.hardsigmoid, (r(10) * 4,), "hardsigmoid_backward"),
    "glu": (F.glu, (r(3, 8),), "glu_backward"),
    "softmax": (lambda x: torch.softmax(x, -1), (r(3, 7),), "_softmax_backward_data"),
    "log_softmax": (lambda x: torch.log_softmax(x, 0), (r(3, 7),), "_log_softmax_backward_data"),
    "max_pool2d": (nn.MaxPool2d(3, 2, 1), (r(1, 2, 9, 9),), "max_pool2d_with_indices_backward"),
    "max_pool3d": (nn.MaxPool3d(2), (r(1, 2, 4, 4, 4),), "max_pool3d_with_indices_backward"),
    "adaptive_max_pool2d": (nn.AdaptiveMaxPool2d(2), (r(1, 3, 7, 7),), "adaptive_max_pool2d_backward"),
    "avg_pool2d": (nn.AvgPool2d(3, 2, 1), (r(1, 2, 8, 8),), "avg_pool2d_backward"),
    "avg_pool3d": (nn.AvgPool3d(2), (r(1, 2, 4, 4, 4),), "avg_pool3d_backward"),
    "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d((2, 3)), (r(1, 3, 7, 7),), "_adaptive_avg_pool2d_backward"),
    "adaptive_avg_pool3d": (nn.AdaptiveAvgPool3d(2), (r(1, 2, 5, 5, 5),), "_adaptive_avg_pool3d_backward"),
    "batch_norm_train": (nn.BatchNorm2d(3).train(), (r(4, 3, 5, 5),), "native_batch_norm_backward"),
    "batch_norm_eval": (nn.BatchNorm2d(3).eval(), (r(2, 3, 4, 4),), "native_batch_norm_backward"),
    "layer_norm": (nn.LayerNorm(6), (r(2, 5, 6),), "native_layer_norm_backward"),
    "group_norm": (nn.GroupNorm(2, 4), (r(2, 4, 3, 3),), "native_group_norm_backward"),
    "nll_loss": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), (r(6, 5), labels(5, 6)), "nll_loss_backward"),
    "nll_loss_weight_ignore_sum": (
        lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, weight=torch.arange(1.0, 6.0).to(x),
                                ignore_index=2, reduction="sum"),
        (r(8, 5), labels(5, 8)), "nll_loss_backward"),
    "nll_loss2d": (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), (r(2, 4, 3, 3), labels(4, 2, 3, 3)),
                   "nll_loss2d_backward"),
    "cross_entropy": (F.cross_entropy, (r(6, 5), labels(5, 6)), "nll_loss_backward"),
    "cross_entropy_label_smoothing": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=1),
                                      (r(6, 5), labels(5, 6)), "nll_loss_backward"),
    "embedding": (nn.Embedding(10, 4), (torch.tensor([[1, 2, 2], [9, 0, 1]]),), "embedding_dense_backward"),
    "embedding_padding_idx": (nn.Embedding(10, 4, padding_idx=2), (torch.tensor([[1, 2, 2], [9, 0, 1]]),),
                              "embedding_dense_backward"),
    "upsample_nearest2d": (nn.Upsample(scale_factor=2, mode="nearest"), (r(1, 2, 3, 3),),
                           "upsample_nearest2d_backward"),
    "upsample_nearest1d": (nn.Upsample(scale_factor=3, mode="nearest"), (r(1, 2, 4),), "upsample_nearest1d_backward"),
    "upsample_bilinear2d": (nn.Upsample(scale_factor=2, mode="bilinear"), (r(1, 2, 3, 3),),
                            "upsample_bilinear2d_backward"),
    "upsample_linear1d": (nn.Upsample(scale_factor=2, mode="linear"), (r(1, 2, 5),), "upsample_linear1d_backward"),
    "upsample_trilinear3d": (nn.Upsample(scale_factor=2, mode="trilinear"), (r(1, 1, 2, 3, 3),),
                             "upsample_trilinear3d_backward"),
}


# A composite op's backend implementation, below the dispatch mode that sees the op.
DEVICE_KERNEL = {"convolution_backward": "convolution_backward_overrideable"}


class _OpsSeen(TorchDispatchMode):
    """Records the ATen op names dispatched (autograd's device thread inherits the mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._schema.name.removeprefix("aten::"))
        return func(*args, **(kwargs or {}))


def _upstream(shape) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(1))


def _gradients(fn, inputs, device: str, dtype: torch.dtype = torch.float32, seen: _OpsSeen | None = None):
    """Gradients of ``fn`` with respect to its floating inputs and its parameters, on the CPU."""
    if isinstance(fn, nn.Module):
        fn = copy.deepcopy(fn).to(dtype).to(device)
    leaves = [x.to(dtype).to(device).requires_grad_() if x.is_floating_point() else x.to(device) for x in inputs]
    output = fn(*leaves)
    upstream = _upstream(output.shape).to(dtype).to(device)
    wrt = [x for x in leaves if x.requires_grad] + (list(fn.parameters()) if isinstance(fn, nn.Module) else [])
    if seen is None:
        grads = torch.autograd.grad(output, wrt, upstream)
    else:
        with seen:
            grads = torch.autograd.grad(output, wrt, upstream)
    return [grad.detach().cpu().float() for grad in grads]


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_runs_on_device_and_matches_cpu_autograd(name):
    """Products as the CPU computes them: what is left is the kernels' plumbing and the per-core
    sums of the forward reductions (float32 rounding only)."""
    fn, inputs, backward_op = CASES[name]
    expected = _gradients(fn, inputs, "cpu")
    seen = _OpsSeen()
    with md.track_fallbacks() as fallbacks, numerics_settings(matmul_precision="float"):
        got = _gradients(fn, inputs, "mlu", seen=seen)
    assert fallbacks.ops == (), f"{name} fell back to the CPU for {fallbacks.ops}"
    assert backward_op in seen.names, f"{name}: autograd reached {sorted(seen.names)}, not {backward_op}"
    assert f"aten::{DEVICE_KERNEL.get(backward_op, backward_op)}" in md.kernel_registry()
    for got_grad, expected_grad in zip(got, expected, strict=True):
        assert metrics(got_grad, expected_grad)["rel_mse"] <= 1e-6, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_default_profile_backward_within_cnnl_bound(name, dtype):
    fn, inputs, _ = CASES[name]
    expected = _gradients(fn, inputs, "cpu")
    with md.track_fallbacks() as fallbacks, numerics_settings(core_version="MLU270", matmul_precision="int16"):
        got = _gradients(fn, inputs, "mlu", dtype)
    assert fallbacks.ops == (), f"{name} fell back to the CPU for {fallbacks.ops}"
    for got_grad, expected_grad in zip(got, expected, strict=True):
        judged = metrics(got_grad, expected_grad)
        assert judged["rel_mse"] <= CNNL_BOUND, f"{name}: rel_mse {judged['rel_mse']:.2e}"


def _float16_sum_of_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Independent reference of the float16 matmul class: exact float64 products, one rounding."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16)


def test_float16_matmul_backward_accumulates_in_float32():
    """grad_input of a float16 linear layer (products unquantized) is ``grad @ W`` rounded once to
    float16 (at most one float16 ulp from the exact product), as the profile's matmul class says."""
    x = r(16, 64).half()
    weight = (r(32, 64) * 0.2).half()
    upstream = r(16, 32).half()
    x_mlu = x.to("mlu").requires_grad_()
    with numerics_settings(matmul_precision="float"):
        (grad_x,) = torch.autograd.grad(F.linear(x_mlu, weight.to("mlu")), x_mlu, upstream.to("mlu"))
    got = grad_x.cpu().numpy()
    expected = _float16_sum_of_products(upstream.numpy(), weight.numpy())
    ulp = np.spacing(np.abs(expected).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - expected.astype(np.float64)) <= ulp)


def _tf32(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to 10 explicit mantissa bits, ties to even (numpy frexp/ldexp)."""
    mantissa, exponent = np.frexp(values.astype(np.float64))
    return np.ldexp(np.round(mantissa * 2.0 ** 11) / 2.0 ** 11, exponent)


def test_convolution_backward_follows_the_active_profile():
    """On MLU370 the conv backward multiplies TF32-rounded operands (and autograd runs it on its
    own thread, which must see the profile selected by the caller): grad_input equals the float64
    transposed convolution of rounded grad_output and weight, and is measurably not the exact one."""
    x = r(2, 3, 8, 8)
    weight = r(4, 3, 3, 3)
    upstream = r(2, 4, 6, 6)
    with mlu_model.core_version("MLU370"):
        x_mlu = x.to("mlu").requires_grad_()
        (grad_x,) = torch.autograd.grad(F.conv2d(x_mlu, weight.to("mlu")), x_mlu, upstream.to("mlu"))
    rounded = torch.ops.aten.convolution_backward.default(
        torch.from_numpy(_tf32(upstream.numpy())), x.double(), torch.from_numpy(_tf32(weight.numpy())),
        None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, False])[0]
    exact = torch.ops.aten.convolution_backward.default(
        upstream.double(), x.double(), weight.double(), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
        [True, False, False])[0]
    assert metrics(grad_x.cpu(), rounded)["rel_mse"] < 2e-6
    assert 2e-5 < metrics(grad_x.cpu(), exact)["rel_mse"] < 2.0 ** -10


QMAX = {"int8": 127, "int16": 32767}


def _reference_scale(t: torch.Tensor, qmax: int) -> float:
    """``qmax / absmax`` in float64, held as float32 (the quantization tool's rule)."""
    return float(np.float32(qmax / np.float64(t.abs().max())))


@pytest.mark.parametrize("precision", ["int8", "int16"])
@pytest.mark.parametrize("stride, padding, dilation, groups", [(1, 0, 1, 1), (2, 1, 2, 2)],
                         ids=["plain", "stride-pad-dilation-groups"])
def test_mlu270_convolution_backward_against_the_integer_reference(precision, stride, padding, dilation, groups):
    """MLU270 quantizes grad_output, weight and input per tensor and multiplies the integers:
    grad_input and grad_weight equal the numpy int64 products dequantized (bit for bit in int8,
    whose sums stay exact in float32; within float32 accumulation rounding in int16)."""
    qmax = QMAX[precision]
    x, weight = r(2, 4, 9, 9), r(6, 4 // groups, 3, 3)
    conv_args = ([stride] * 2, [padding] * 2, [dilation] * 2, groups)
    upstream = r(*F.conv2d(x, weight, None, *conv_args).shape)
    with numerics_settings(core_version="MLU270", matmul_precision=precision):
        x_mlu, w_mlu = x.to("mlu").requires_grad_(), weight.to("mlu").requires_grad_()
        F.conv2d(x_mlu, w_mlu, None, *conv_args).backward(upstream.to("mlu"))
    sx, sw, sg = (_reference_scale(t, qmax) for t in (x, weight, upstream))
    qx, qw, qg = (ref.quantize(t.numpy(), scale, qmax) for t, scale in ((x, sx), (weight, sw), (upstream, sg)))
    expected_x = ref.dequantize(ref.conv2d_input_grad(qg, qw, x.shape, stride, padding, dilation, groups), sg, sw)
    expected_w = ref.dequantize(ref.conv2d_weight_grad(qx, qg, weight.shape, stride, padding, dilation, groups),
                                sx, sg)
    for got, expected in ((x_mlu.grad.cpu().numpy(), expected_x), (w_mlu.grad.cpu().numpy(), expected_w)):
        if precision == "int8":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    float_grad = torch.nn.grad.conv2d_input(x.shape, weight, upstream, *conv_args)
    assert metrics(x_mlu.grad.cpu(), float_grad)["max_abs"] > 0  # quantized, not the float product


def test_convolution_bias_gradient_is_a_sum_of_the_unrounded_gradient():
    """The bias gradient is an accumulation, not a product: no TF32 rounding on MLU370."""
    upstream = r(2, 4, 6, 6)
    conv = nn.Conv2d(3, 4, 3).to("mlu")
    with mlu_model.core_version("MLU370"):
        conv(r(2, 3, 8, 8).to("mlu")).backward(upstream.to("mlu"))
    expected = upstream.double().sum((0, 2, 3))
    assert metrics(conv.bias.grad.cpu(), expected)["rel_mse"] < 2e-7


def test_no_registered_kernel_hides_a_composite_op_from_autograd():
    """A device kernel for a CompositeImplicitAutograd op would replace its decomposition, and
    with it its gradient (torch then backpropagates nothing through it)."""
    names = [f"aten::{n}" for n in (*plugin.ELEMENTWISE_OPS, *plugin.ACCUMULATING_OPS,
                                      *plugin.SOFTMAX_BACKWARD, "convolution_backward_overrideable",
                                      "native_dropout", "bernoulli_.float")]
    composite = [n for n in names if torch._C._dispatch_has_kernel_for_dispatch_key(n, "CompositeImplicitAutograd")]
    assert composite == []
