"""The convolution backward's core split (MLU370) as one grouped call, against the per-core
loop it replaced: each core's part of the reduced dim (a group's output channels for grad_input,
the batch for grad_weight) computed by its own ``aten.convolution_backward`` on the slices.

The CPU picks a different kernel for a grouped convolution, so on random float32 operands the
two differ in the order of each part's float32 sum; with integer-valued operands every partial
sum is exact in float32, so any order gives the same bits and the layout (which element lands in
which part, zero padding, groups) is checked bit for bit.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from mluverify.device import _conv_gradients
from mluverify.device._conv_gradients import InputGradient, WeightGradient
from mluverify.device.contractions import ConvolutionProduct, ProductCall, device_result
from mluverify.device.numerics import NumericsSettings
from mluverify.device.reductions import combine_pairwise

aten = torch.ops.aten
MLU370 = NumericsSettings(core_version="MLU370")


def _backward(geometry: tuple, grad_output, input, weight, mask: list[bool]) -> torch.Tensor:
    stride, padding, dilation, transposed, output_padding, groups = geometry
    grads = aten.convolution_backward.default(grad_output, input, weight, None, stride, padding, dilation,
                                              transposed, output_padding, groups, mask)
    return grads[0] if mask[0] else grads[1]


def loop_input_partials(geometry: tuple, grad_output, input, weight, cores: int) -> torch.Tensor:
    """One backward call per contiguous part of ceil(E / cores) of each group's output
    channels; an empty part is +0."""
    groups, transposed = geometry[5], geometry[3]
    extent = grad_output.shape[1] // groups
    size = max(1, -(-extent // cores))
    parts = []
    for start in range(0, cores * size, size):
        stop = min(start + size, extent)
        if start >= extent:
            parts.append(torch.zeros_like(parts[0]))
            continue
        g = grad_output.unflatten(1, (groups, -1))[:, :, start:stop].flatten(1, 2)
        w = weight[:, start:stop] if transposed else weight.unflatten(0, (groups, -1))[:, start:stop].flatten(0, 1)
        parts.append(_backward(geometry, g, input, w, [True, False, False]))
    return torch.stack(parts, -1)


def loop_weight_partials(geometry: tuple, grad_output, input, weight, cores: int) -> torch.Tensor:
    """One backward call per contiguous part of ceil(N / cores) images; an empty part is +0."""
    extent = input.shape[0]
    size = max(1, -(-extent // cores))
    parts = [_backward(geometry, grad_output[s:s + size], input[s:s + size], weight, [False, True, False])
             for s in range(0, extent, size)]
    parts += [torch.zeros_like(parts[0])] * (cores - len(parts))
    return torch.stack(parts, -1)


def random_case(rng: random.Random, values) -> tuple:
    """A convolution (1d/2d/3d, grouped, strided, padded, dilated, maybe transposed) and its
    operands; channel and batch extents that often do not divide by the core count."""
    dims = rng.choice([1, 2, 3])
    groups = rng.choice([1, 2, 3])
    in_channels, out_channels, batch = groups * rng.randint(1, 4), groups * rng.randint(1, 7), rng.randint(1, 7)
    kernel = tuple(rng.randint(1, 3) for _ in range(dims))
    stride = tuple(rng.randint(1, 2) for _ in range(dims))
    padding = tuple(rng.randint(0, 1) for _ in range(dims))
    dilation = tuple(rng.randint(1, 2) for _ in range(dims))
    transposed = rng.random() < 0.3
    output_padding = tuple(rng.randint(0, max(s, d) - 1) if transposed else 0 for s, d in zip(stride, dilation))
    spatial = tuple(rng.randint(k * d + 2, 8) for k, d in zip(kernel, dilation))
    geometry = (stride, padding, dilation, transposed, output_padding, groups)
    x = values((batch, in_channels, *spatial))
    w = values((in_channels, out_channels // groups, *kernel) if transposed else (out_channels, in_channels // groups, *kernel))
    y = aten.convolution.default(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    return geometry, x, w, values(tuple(y.shape))


def small_integers(shape: tuple) -> torch.Tensor:
    return torch.randint(-4, 5, shape).float()


def grouped_partials(geometry: tuple, grad_output, x, w, cores: int) -> tuple[torch.Tensor, torch.Tensor]:
    input_gradient, weight_gradient = InputGradient(*geometry, tuple(x.shape)), WeightGradient(*geometry, tuple(w.shape))
    return (input_gradient.partials(grad_output, input_gradient.split_right(w, cores), cores),
            weight_gradient.partials(x, weight_gradient.split_right(grad_output, cores), cores))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cores", [2, 3, 4, 16])
def test_grouped_partials_equal_the_per_core_loop_bit_for_bit(seed, cores):
    torch.manual_seed(seed)
    rng = random.Random(seed * 100 + cores)
    for _ in range(8):
        geometry, x, w, grad_output = random_case(rng, small_integers)
        input_partials, weight_partials = grouped_partials(geometry, grad_output, x, w, cores)
        assert torch.equal(input_partials, loop_input_partials(geometry, grad_output, x, w, cores)), geometry
        assert torch.equal(weight_partials, loop_weight_partials(geometry, grad_output, x, w, cores)), geometry


def test_empty_parts_are_positive_zero():
    """One output channel per group and two images over 16 cores: 15 and 14 parts are empty."""
    geometry = ((1, 1), (1, 1), (1, 1), False, (0, 0), 2)
    x, w = torch.randn(2, 4, 5, 5), torch.randn(2, 2, 3, 3)
    grad_output = torch.randn(2, 2, 5, 5)
    input_partials, weight_partials = grouped_partials(geometry, grad_output, x, w, 16)
    for partials, used in ((input_partials, 1), (weight_partials, 2)):
        empty = partials[..., used:]
        assert torch.equal(empty, torch.zeros_like(empty)) and not torch.signbit(empty).any()
        assert (partials[..., :used] != 0).any()


def test_an_empty_batch_gives_zero_weight_partials():
    """No image at all: every core's part is empty, the weight gradient +0."""
    geometry = ((1, 1), (0, 0), (1, 1), False, (0, 0), 1)
    x, w, grad_output = torch.randn(0, 3, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(0, 4, 3, 3)
    input_partials, weight_partials = grouped_partials(geometry, grad_output, x, w, 4)
    assert input_partials.shape == (0, 3, 5, 5, 4)
    assert torch.equal(weight_partials, torch.zeros(4, 3, 3, 3, 4)) and not torch.signbit(weight_partials).any()


@pytest.mark.parametrize("seed", range(4))
def test_random_float_partials_within_float32_summation_of_the_exact_parts(seed):
    """Random operands: each grouped partial is the float64 per-core part within n u sum |a b|
    (n: the terms of one output element), as the loop's is."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    for _ in range(6):
        cores = rng.choice([2, 3, 4, 16])
        geometry, x, w, grad_output = random_case(rng, torch.randn)
        input_partials, weight_partials = grouped_partials(geometry, grad_output, x, w, cores)
        double = [t.double() for t in (grad_output, x, w)]
        magnitude = [t.abs() for t in double]
        for got, loop in ((input_partials, loop_input_partials), (weight_partials, loop_weight_partials)):
            exact = loop(geometry, *double, cores)
            bound = loop(geometry, *magnitude, cores) * (grad_output.numel() + x.numel()) * 2.0 ** -24
            assert ((got.double() - exact).abs() <= bound).all(), geometry


def test_float16_gradients_round_the_combined_partials_once():
    """float16 operands are widened, split, the partials added pairwise in float32 and the sum
    rounded to float16 once (integer values: exact in float16, TF32 and every partial sum)."""
    torch.manual_seed(7)
    geometry, x, w, grad_output = random_case(random.Random(7), small_integers)
    product = InputGradient(*geometry, tuple(x.shape))
    call = ProductCall(product, finish=lambda y: y, cpu_op=product, weight=False)
    got = device_result(call, grad_output.half(), w.half(), MLU370, 4).half()
    expected = combine_pairwise(loop_input_partials(geometry, grad_output, x, w, 4)).half()
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def _split_operands(product, left: torch.Tensor, right: torch.Tensor, cores: int) -> tuple:
    return left, product.split_right(right, cores), cores


@pytest.mark.parametrize("weights_mapped, slice_channels", [(2, 64), (1, 32)])
@pytest.mark.parametrize("groups", [1, 2])
def test_weight_gradient_in_channel_slices_is_the_one_call_bit_for_bit(monkeypatch, groups, weights_mapped,
                                                                       slice_channels):
    """Where the partials would pass the fresh-mapping size, the weight gradient is computed in
    slices of output channels: on random float operands (any change of summation order would
    show) the same bits as the one call's partials combined."""
    torch.manual_seed(groups)
    geometry = ((1, 1), (1, 1), (1, 1), False, (0, 0), groups)
    x, w = torch.randn(7, 32 * groups, 6, 6), torch.randn(128 * groups, 32, 3, 3)
    grad_output = torch.randn(7, 128 * groups, 6, 6)
    product = WeightGradient(*geometry, tuple(w.shape))
    operands = _split_operands(product, x, grad_output, 4)
    one_call = combine_pairwise(product.partials(*operands))
    assert product._slice_channels(4) is None
    # mapped afresh from (weights_mapped x the weight's bytes) + 1: 2 slices (partials 2x the
    # weight each) or 4 (1x each: 32 channels, two oneDNN blocks)
    monkeypatch.setattr(_conv_gradients, "_FRESH_MAPPING_BYTES", weights_mapped * 4 * w.numel() + 1)
    assert product._slice_channels(4) == slice_channels
    sliced = product.combined(*operands)
    assert sliced.is_contiguous() and torch.equal(sliced.view(torch.int32), one_call.view(torch.int32))


@pytest.mark.parametrize("channels_last", [False, True])
def test_convolution_partials_combined_unmerged_are_the_partials_combined(channels_last):
    """``combined`` adds the grouped call's cores before merging a group's channels (no copy of
    the partials): the same bits, laid out row-major, for the forward and the input gradient."""
    torch.manual_seed(3)
    geometry = ((1, 1), (1, 1), (1, 1), False, (0, 0), 2)
    x, w = torch.randn(3, 10, 7, 7), torch.randn(6, 5, 3, 3)
    grad_output = torch.randn(3, 6, 7, 7)
    if channels_last:
        x, grad_output = x.to(memory_format=torch.channels_last), grad_output.to(memory_format=torch.channels_last)
    for product, left, right in ((ConvolutionProduct(*geometry), x, w),
                                 (InputGradient(*geometry, tuple(x.shape)), grad_output, w)):
        operands = _split_operands(product, left, right, 4)
        got, expected = product.combined(*operands), combine_pairwise(product.partials(*operands))
        assert got.is_contiguous() and torch.equal(got.view(torch.int32), expected.view(torch.int32))
