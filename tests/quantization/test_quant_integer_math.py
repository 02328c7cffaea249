"""The exact integer arithmetic (pure functions on CPU tensors) against the numpy int64 reference."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mluverify.device.quantization._integer import (
    FLOAT32_EXACT, QuantizedWeight, float32_chunks, integer_conv, integer_linear)
from mluverify.device.quantization._ops import exact_quant_conv, exact_quant_linear
import quant_reference as reference

CONV_CASES = [  # shape of x, shape of w, stride, padding, dilation, groups
    ((2, 3, 9, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 11, 10), (6, 2, 3, 2), (2, 1), (0, 2), (2, 1), 2),
    ((2, 5, 13), (3, 5, 4), (3,), (2,), (1,), 1),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), 1),
]


def _random_integers(shape, qmax, seed):
    return torch.randint(-qmax, qmax + 1, shape, generator=torch.Generator().manual_seed(seed)).float()


@pytest.mark.parametrize("qmax", [127, 32767])
@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation,groups", CONV_CASES)
def test_integer_conv_equals_int64_reference(qmax, x_shape, w_shape, stride, padding, dilation, groups):
    qx, qw = _random_integers(x_shape, qmax, 1), _random_integers(w_shape, qmax, 2)
    acc = integer_conv(qx, QuantizedWeight.of(qw, x_bound=qmax), stride, padding, dilation, groups)
    expected = reference.conv_int64(qx.numpy().astype(np.int64), qw.numpy().astype(np.int64),
                                    stride, padding, dilation, groups)
    np.testing.assert_array_equal(acc.numpy().astype(np.int64), expected)


def test_integer_conv_splits_channels_when_float32_would_round():
    # 600 channels of 3x3 int8 extremes: |acc| up to 600*9*127*127 ~ 8.7e7 > 2**24, where a
    # single float32 conv would round; the channel chunks must keep the result exact.
    qx = torch.full((1, 600, 3, 3), 127.0)
    qw = torch.full((2, 600, 3, 3), 127.0)
    qw[1] = -127.0
    qx[0, 0, 0, 0] = 126.0  # an odd total, so rounding to a float32 neighbour would show
    planned = QuantizedWeight.of(qw, x_bound=127)
    assert len(planned.chunks) > 1
    acc = integer_conv(qx, planned, (1, 1), (0, 0), (1, 1), 1)
    expected = reference.conv_int64(qx.numpy().astype(np.int64), qw.numpy().astype(np.int64),
                                    (1, 1), (0, 0), (1, 1), 1)
    assert abs(int(expected.max())) > FLOAT32_EXACT
    np.testing.assert_array_equal(acc.numpy().astype(np.int64), expected)


@pytest.mark.parametrize("qmax", [127, 32767])
def test_integer_linear_equals_int64_reference(qmax):
    qx, qw = _random_integers((3, 5, 3000), qmax, 3), _random_integers((7, 3000), qmax, 4)
    acc = integer_linear(qx, QuantizedWeight.of(qw, x_bound=qmax))
    expected = np.einsum("...k,ok->...o", qx.numpy().astype(np.int64), qw.numpy().astype(np.int64))
    np.testing.assert_array_equal(acc.numpy().astype(np.int64), expected)


def test_float32_chunks_cover_every_channel_within_the_bound():
    weight_l1 = torch.rand(8, 500, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 5000
    chunks = float32_chunks(weight_l1, x_bound=127.0)
    assert chunks[0][0] == 0 and chunks[-1][1] == 500
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    for start, stop in chunks:
        assert float(weight_l1[:, start:stop].sum(1).max()) * 127 <= FLOAT32_EXACT
    assert len(chunks) > 1


def test_float32_chunks_give_up_when_one_channel_exceeds_the_bound():
    assert float32_chunks(torch.full((1, 3), 32767.0 * 9, dtype=torch.float64), x_bound=32767.0) is None


def test_int16_weights_fall_back_to_float64():
    assert QuantizedWeight.of(torch.full((2, 3, 3), 32767.0), x_bound=32767).chunks is None


def _layer_case(seed, w_shape, x_shape, per_channel, qmax):
    gen = torch.Generator().manual_seed(seed)
    x, w = torch.randn(x_shape, generator=gen), torch.randn(w_shape, generator=gen)
    b = torch.randn(w_shape[0], generator=gen)
    input_scale = qmax / float(x.abs().max()) * 1.1  # > qmax/absmax: the extremes clamp
    absmax = w.abs().flatten(1).amax(1) if per_channel else w.abs().max().expand(w_shape[0])
    weight_scales = (qmax / absmax).float()
    return x, w, b, float(torch.tensor(input_scale, dtype=torch.float32)), weight_scales.tolist()


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("qmax", [127, 32767])
def test_exact_quant_conv_equals_reference(qmax, per_channel):
    x, w, b, input_scale, weight_scales = _layer_case(6, (5, 3, 3, 3), (2, 3, 10, 9), per_channel, qmax)
    y = exact_quant_conv(x, w, b, [2, 1], [1, 1], [1, 1], 1, input_scale, weight_scales, qmax, None, None)
    expected = reference.quant_conv(x.numpy(), w.numpy(), b.numpy(), (2, 1), (1, 1), (1, 1), 1,
                                    input_scale, weight_scales, qmax)
    np.testing.assert_array_equal(y.numpy(), expected)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("qmax", [127, 32767])
def test_exact_quant_linear_equals_reference(qmax, per_channel):
    x, w, b, input_scale, weight_scales = _layer_case(7, (6, 40), (3, 40), per_channel, qmax)
    y = exact_quant_linear(x, w, b, input_scale, weight_scales, qmax)
    expected = reference.quant_linear(x.numpy(), w.numpy(), b.numpy(), input_scale, weight_scales, qmax)
    np.testing.assert_array_equal(y.numpy(), expected)


@settings(max_examples=40, deadline=None)
@given(channels=st.integers(1, 700), out_channels=st.integers(1, 4), kernel=st.integers(1, 3),
       qmax=st.sampled_from([127, 32767]), seed=st.integers(0, 2**16))
def test_integer_conv_is_exact_for_any_channel_count(channels, out_channels, kernel, qmax, seed):
    # Extreme-heavy values (many +-qmax) push the accumulation bound past 2**24 for int8 too.
    gen = torch.Generator().manual_seed(seed)
    qx = torch.randint(-1, 2, (1, channels, 4, 4), generator=gen).float() * qmax
    qw = torch.randint(-qmax, qmax + 1, (out_channels, channels, kernel, kernel), generator=gen).float()
    acc = integer_conv(qx, QuantizedWeight.of(qw, x_bound=qmax), (1, 1), (1, 1), (1, 1), 1)
    expected = reference.conv_int64(qx.numpy().astype(np.int64), qw.numpy().astype(np.int64),
                                    (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_array_equal(acc.numpy().astype(np.int64), expected)
