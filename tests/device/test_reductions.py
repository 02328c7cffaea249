"""Multi-core reductions on the device, bit for bit against the numpy partial-sum model
(``numerics_reference``: parts of ceil(E / cores) elements, each accumulated in float32 in 64
lanes, lanes and partials added pairwise in float32), for 1, 4 and 16 cores.

Layer by layer (``cnnl``) a reduction always uses ``numerics.LAYER_BY_LAYER_CORES`` (4) cores;
fused (``cnml``) it uses the core number. Ops here run eagerly on ``mlu`` in the kernel mode
whose core count is under test; one test runs a real fused program.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import numerics_reference as ref
from mluverify.device import kernel_mode, numerics
from mluverify.device.fusion import fuse, fusion_summary
from mluverify.device.numerics import numerics_settings
from mluverify.device.contractions import combine_partials
from mluverify.device.reductions import combine_pairwise, core_sum

CORES = [1, 4, 16]


def on_cores(cores: int, fn, *tensors):
    """``fn`` on device copies of ``tensors``, its reductions split across ``cores`` cores."""
    mode = "cnnl" if cores == numerics.LAYER_BY_LAYER_CORES else "cnml"
    with numerics_settings(core_number=cores if mode == "cnml" else 1), kernel_mode(mode), torch.no_grad():
        result = fn(*(t.to("mlu") for t in tensors))
    return tuple(r.cpu() for r in result) if isinstance(result, tuple) else result.cpu()


def same_bits(got: torch.Tensor, expected: np.ndarray) -> None:
    assert got.dtype == torch.float32 and tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(got.numpy().view(np.int32), np.asarray(expected, np.float32).view(np.int32))


@pytest.fixture
def x():
    return torch.randn(3, 5, 123, 7, generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("cores", CORES)
def test_sum_and_mean(cores, x):
    a = x.numpy()
    same_bits(on_cores(cores, torch.sum, x), ref.core_sum(a, None, cores))
    same_bits(on_cores(cores, lambda t: t.sum((0, 2)), x), ref.core_sum(a, (0, 2), cores))
    same_bits(on_cores(cores, lambda t: t.sum(-1, keepdim=True), x), ref.core_sum(a, (-1,), cores, keepdims=True))
    same_bits(on_cores(cores, lambda t: t.mean(2), x), ref.core_mean(a, (2,), cores))
    same_bits(on_cores(cores, torch.mean, x), ref.core_mean(a, None, cores))


@pytest.mark.parametrize("cores", CORES)
def test_sums_with_no_element_kept_or_reduced(cores):
    """Long reduced extents (several lane steps) beside an empty kept dim, and the reverse."""
    empty_rows = np.zeros((0, 1000), np.float32)
    assert core_sum(torch.from_numpy(empty_rows), [1], cores).shape == (0,)
    same_bits(core_sum(torch.from_numpy(empty_rows), [0], cores), np.zeros(1000, np.float32))


@pytest.mark.parametrize("cores", CORES)
def test_var_and_std(cores, x):
    a = x.numpy()
    same_bits(on_cores(cores, lambda t: t.var(2), x), ref.core_var(a, (2,), cores, 1))
    same_bits(on_cores(cores, lambda t: t.var((0, 1), unbiased=False, keepdim=True), x),
              ref.core_var(a, (0, 1), cores, 0, keepdims=True))
    same_bits(on_cores(cores, lambda t: t.std(-1), x), np.sqrt(ref.core_var(a, (-1,), cores, 1)))


@pytest.mark.parametrize("cores", CORES)
def test_softmax_and_log_softmax(cores, x):
    a = x.numpy() * 4
    same_bits(on_cores(cores, lambda t: torch.softmax(t, 2), x * 4), ref.softmax(a, 2, cores))
    same_bits(on_cores(cores, lambda t: torch.log_softmax(t, 0), x * 4), ref.softmax(a, 0, cores, log=True))


@pytest.mark.parametrize("cores", CORES)
def test_layer_norm_and_group_norm(cores, x):
    gen = torch.Generator().manual_seed(6)
    weight, bias = torch.randn(123, 7, generator=gen), torch.randn(123, 7, generator=gen)
    out, mean, rstd = on_cores(cores, lambda t, w, b: torch.native_layer_norm(t, [123, 7], w, b, 1e-5),
                               x, weight, bias)
    y, m, _, r = ref.normalized(x.numpy(), (2, 3), 1e-5, cores)
    same_bits(out, y * weight.numpy() + bias.numpy())
    same_bits(mean, m)
    same_bits(rstd, r)
    channels_weight, channels_bias = torch.randn(5, generator=gen), torch.randn(5, generator=gen)
    grouped = on_cores(cores, lambda t, w, b: F.group_norm(t, 5, w, b, 1e-5), x, channels_weight, channels_bias)
    y, *_ = ref.normalized(x.numpy().reshape(3, 5, -1), (2,), 1e-5, cores)
    expected = y.reshape(3, 5, -1) * channels_weight.numpy().reshape(1, 5, 1) + channels_bias.numpy().reshape(1, 5, 1)
    same_bits(grouped, expected.reshape(x.shape))


@pytest.mark.parametrize("cores", CORES)
def test_batch_norm_training_and_running_statistics(cores, x):
    gen = torch.Generator().manual_seed(7)
    weight, bias = torch.randn(5, generator=gen), torch.randn(5, generator=gen)
    running_mean, running_var = torch.randn(5, generator=gen), torch.rand(5, generator=gen) + 0.5
    mlu_mean, mlu_var = running_mean.to("mlu"), running_var.to("mlu")
    mode = "cnnl" if cores == numerics.LAYER_BY_LAYER_CORES else "cnml"
    with numerics_settings(core_number=cores if mode == "cnml" else 1), kernel_mode(mode):
        out = F.batch_norm(x.to("mlu"), mlu_mean, mlu_var, weight.to("mlu"), bias.to("mlu"), training=True,
                           momentum=0.1, eps=1e-5).cpu()
    y, m, v, _ = ref.normalized(x.numpy(), (0, 2, 3), 1e-5, cores)
    same_bits(out, y * weight.numpy().reshape(1, 5, 1, 1) + bias.numpy().reshape(1, 5, 1, 1))
    extent = 3 * 123 * 7
    momentum = np.float32(0.1)
    same_bits(mlu_mean.cpu(), running_mean.numpy() * np.float32(1 - 0.1) + m.reshape(-1) * momentum)
    unbiased = v.reshape(-1) * np.float32(extent / (extent - 1))
    same_bits(mlu_var.cpu(), running_var.numpy() * np.float32(1 - 0.1) + unbiased * momentum)


POOLS = [  # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 2), (2, 1), (1, 1), True, False, None),
    ((5, 5), (3, 3), (2, 0), True, True, None),
    ((2, 2), (2, 2), (0, 0), False, True, 3),
]


@pytest.mark.parametrize("cores", CORES)
@pytest.mark.parametrize("pool", POOLS, ids=lambda p: f"k{p[0]}s{p[1]}p{p[2]}{'c' if p[3] else ''}")
def test_avg_pool2d(cores, pool):
    kernel, stride, padding, ceil_mode, include_pad, divisor = pool
    x = torch.randn(2, 3, 11, 13, generator=torch.Generator().manual_seed(8))
    got = on_cores(cores, lambda t: F.avg_pool2d(t, kernel, stride, padding, ceil_mode, include_pad, divisor), x)
    same_bits(got, ref.avg_pool(x.numpy(), kernel, stride, padding, ceil_mode, include_pad, divisor, cores))


@pytest.mark.parametrize("cores", CORES)
def test_avg_pool3d_and_adaptive_avg_pool(cores):
    x = torch.randn(2, 3, 7, 9, 5, generator=torch.Generator().manual_seed(9))
    got = on_cores(cores, lambda t: F.avg_pool3d(t, 3, 2, 1), x)
    same_bits(got, ref.avg_pool(x.numpy(), (3, 3, 3), (2, 2, 2), (1, 1, 1), False, True, None, cores))
    same_bits(on_cores(cores, lambda t: F.adaptive_avg_pool2d(t, (3, 4)), x[:, :, 0]),
              ref.adaptive_avg_pool(x[:, :, 0].numpy(), (3, 4), cores))
    same_bits(on_cores(cores, lambda t: F.adaptive_avg_pool3d(t, (4, 2, 5)), x),
              ref.adaptive_avg_pool(x.numpy(), (4, 2, 5), cores))


def test_float16_reductions_compute_in_float32_and_round_once(x):
    half = x.half()
    got = on_cores(4, lambda t: torch.softmax(t, 2), half)
    assert got.dtype == torch.float16
    np.testing.assert_array_equal(got.numpy(), ref.softmax(half.float().numpy(), 2, 4).astype(np.float16))
    got = on_cores(4, lambda t: t.sum(2), half)
    np.testing.assert_array_equal(got.numpy(), ref.core_sum(half.float().numpy(), (2,), 4).astype(np.float16))


class LongMean(nn.Module):
    """A mean over 100 000 elements (``mean.dim`` joins a fusion group; a bare sum would not)."""

    def forward(self, t):
        return t.mean(0)


def test_core_number_changes_a_fused_long_sums_bits_within_the_bound():
    """The same fused program, core number 1 and 16: different bits, each within the documented
    rounding (ceil(part / 64) additions per lane, log2(64) to add the lanes and log2(cores) to
    add the partials, each at most u sum|x|, then the division) of the exact mean; layer by
    layer the core number changes nothing.
    Positive then negative halves: the parts' sums are large beside the total, so their
    rounding shows."""
    x = torch.rand(100_000, generator=torch.Generator().manual_seed(10)) + 0.5
    x[50_000:] *= -1
    x_mlu = x.to("mlu")
    fused = fuse(LongMean(), (x_mlu,))
    assert fusion_summary(fused).executed_as == "fused"
    results = {}
    for cores in (1, 16):
        with numerics_settings(core_number=cores), torch.no_grad():
            results[cores] = (fused(x_mlu).cpu(), LongMean()(x_mlu).cpu())
    (fused_1, eager_1), (fused_16, eager_16) = results[1], results[16]
    assert not torch.equal(fused_1, fused_16)
    assert torch.equal(eager_1, eager_16)
    same_bits(fused_1, ref.core_mean(x.numpy(), (0,), 1))
    same_bits(fused_16, ref.core_mean(x.numpy(), (0,), 16))
    count = len(x)
    exact, magnitude = x.double().mean().item(), x.double().abs().sum().item()
    for got, cores in ((fused_1, 1), (fused_16, 16)):
        additions = -(-count // cores // ref.LANES) + int(np.log2(ref.LANES)) + int(np.log2(cores))
        assert abs(got.item() - exact) <= additions * ref.U32 * magnitude / count + ref.U32 * abs(exact)


@pytest.mark.parametrize("cores", [1, 2, 4, 16])
def test_combine_pairwise_adds_neighbours_first_bit_for_bit(cores):
    """The partials' last dim added as the reference's tree, for contiguous partials and for the
    view a convolution's partials are (the cores outermost, moved last). Values of mixed
    magnitude, so another pairing rounds differently."""
    values = torch.randn(2, cores, 3, 5, 7, generator=torch.Generator().manual_seed(cores))
    values *= torch.logspace(-6, 6, cores).reshape(1, cores, 1, 1, 1)
    expected = ref.pairwise([values[:, c].numpy() for c in range(cores)])
    for partials in (values.movedim(1, -1), values.movedim(1, -1).contiguous()):
        same_bits(combine_pairwise(partials), expected)
        # a product's partials: 4 (layer by layer) by the C++ extension, in blocks or interleaved
        same_bits(combine_partials(partials.clone()), expected)


def test_combined_partials_of_special_values_are_the_float32_adds():
    """Every 4-tuple of signed zeros, infinities, NaN, the largest and the smallest float32: the
    extension's adds give numpy's float32 results (signed zeros and overflow included; a NaN
    anywhere gives a NaN, whose payload IEEE leaves open)."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45], np.float32)
    tuples = np.array(list(itertools.product(special, repeat=4)), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = ref.pairwise([tuples[:, c] for c in range(4)])
    nan = np.isnan(expected)
    interleaved = torch.from_numpy(tuples)
    for partials in (interleaved, interleaved.t().contiguous().t()):  # and in blocks
        got = combine_partials(partials).numpy()
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.int32), expected[~nan].view(np.int32))
