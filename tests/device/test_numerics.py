"""Each row of the numerics profile table (docs/device.md) against an independent computation.

References are computed in float64 (numpy, or torch float64 on values rounded by numpy's
``frexp``/``round``/``ldexp``), never by the device's own code.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mluverify.device import numerics


def tf32_reference(a: np.ndarray) -> np.ndarray:
    """Round to 10 explicit mantissa bits, ties to even, via frexp (mantissa in [0.5, 1))."""
    mantissa, exponent = np.frexp(a.astype(np.float64))
    return np.ldexp(np.round(mantissa * 2.0**11) / 2.0**11, exponent)


def rel_l2(actual, expected) -> float:
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


def on_mlu(fn, *tensors):
    return fn(*(t.to("mlu") for t in tensors)).cpu()


def randn(*shape, gen, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


# --- the rounding helper itself ---------------------------------------------------------------


def test_round_mantissa_matches_frexp_reference_including_ties(seeded):
    x = randn(10_000, gen=seeded) * 1e3
    bits = x.view(torch.int32)
    ties = (bits & ~0x1FFF) | 0x1000  # exactly half way between two TF32 values
    values = torch.cat([x, ties.view(torch.float32)])
    got = numerics.round_mantissa(values, 10).double().numpy()
    np.testing.assert_array_equal(got, tf32_reference(values.numpy()))


def test_round_mantissa_keeps_inf_and_nan():
    payload_nan = torch.tensor([0x7F800001], dtype=torch.int32).view(torch.float32)
    special = torch.cat([torch.tensor([float("inf"), -float("inf"), float("nan")]), payload_nan])
    got = numerics.round_mantissa(special, 10)
    assert torch.isinf(got[:2]).all() and torch.isnan(got[2:]).all()


# --- float32 conv/matmul: MLU370 TF32-like, MLU270 float32 ---------------------------------


@pytest.mark.parametrize("op", ["mm", "conv2d"])
def test_mlu370_float32_matmul_is_tf32_then_float32_accumulation(op, core_version, seeded):
    core_version("MLU370")
    if op == "mm":
        a, b = randn(64, 256, gen=seeded), randn(256, 48, gen=seeded)
        fn64 = torch.mm
    else:
        a, b = randn(2, 16, 12, 12, gen=seeded), randn(8, 16, 3, 3, gen=seeded)
        fn64 = F.conv2d
    got = on_mlu(fn64, a, b)
    exact = fn64(a.double(), b.double())
    tf32 = fn64(torch.from_numpy(tf32_reference(a.numpy())), torch.from_numpy(tf32_reference(b.numpy())))
    assert rel_l2(got, tf32) < 2e-6, "result is the product of TF32-rounded inputs"
    deviation = rel_l2(got, exact)
    assert 2e-5 < deviation < 2.0**-10, f"deviation from exact float32 inputs: {deviation}"
    assert torch.equal(got, on_mlu(fn64, a, b)), "deterministic"


@pytest.mark.parametrize("op", ["mm", "conv2d"])
def test_mlu270_float32_matmul_keeps_float32_inputs(op, core_version, seeded):
    core_version("MLU270")
    if op == "mm":
        a, b, fn = randn(64, 256, gen=seeded), randn(256, 48, gen=seeded), torch.mm
    else:
        a, b, fn = randn(2, 16, 12, 12, gen=seeded), randn(8, 16, 3, 3, gen=seeded), F.conv2d
    got = on_mlu(fn, a, b)
    assert rel_l2(got, fn(a.double(), b.double())) < 2e-6


def test_tf32_weight_cache_follows_in_place_weight_updates(core_version, seeded):
    core_version("MLU370")
    x, w = randn(8, 64, gen=seeded), randn(16, 64, gen=seeded)
    x_mlu, w_mlu = x.to("mlu"), w.to("mlu")
    first = F.linear(x_mlu, w_mlu).cpu()
    w_mlu.mul_(3.0)  # written on the device: the cached TF32 copy must not be reused
    second = F.linear(x_mlu, w_mlu).cpu()
    ref = lambda weights: torch.from_numpy(tf32_reference(x.numpy())) @ torch.from_numpy(tf32_reference(weights.numpy())).T
    assert rel_l2(first, ref(w)) < 2e-6
    assert rel_l2(second, ref(w * 3.0)) < 2e-6


# --- float16: storage float16, float32 accumulation -------------------------------------------


def _fp16_ulps(actual: torch.Tensor, expected: np.ndarray) -> np.ndarray:
    a = actual.numpy().astype(np.float16).view(np.int16).astype(np.int64)
    e = expected.astype(np.float16).view(np.int16).astype(np.int64)
    return np.abs(a - e)


@pytest.mark.parametrize("version", ["MLU270", "MLU370"])
def test_float16_matmul_accumulates_in_float32_and_rounds_once(version, core_version, seeded):
    core_version(version)
    a, b = randn(64, 512, gen=seeded, dtype=torch.float16), randn(512, 32, gen=seeded, dtype=torch.float16)
    got = on_mlu(torch.mm, a, b)
    assert got.dtype == torch.float16
    exact = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    ulps = _fp16_ulps(got, exact)
    # float32 accumulation of 512 terms is far below half an fp16 ulp: only double-rounding
    # cases may differ, by one ulp. float16 accumulation would miss by many ulps.
    assert ulps.max() <= 1 and (ulps == 0).mean() > 0.97


def test_float16_conv_rounds_result_to_float16(core_version, seeded):
    core_version("MLU370")
    x, w = randn(1, 8, 10, 10, gen=seeded, dtype=torch.float16), randn(4, 8, 3, 3, gen=seeded, dtype=torch.float16)
    got = on_mlu(F.conv2d, x, w)
    exact = F.conv2d(x.double(), w.double()).numpy()
    ulps = _fp16_ulps(got, exact)
    assert got.dtype == torch.float16 and ulps.max() <= 1 and (ulps == 0).mean() > 0.97


@pytest.mark.parametrize("name, fn, npfn", [
    ("add", torch.add, np.add), ("mul", torch.mul, np.multiply), ("sub", torch.sub, np.subtract),
])
def test_float16_elementwise_is_correctly_rounded_per_op(name, fn, npfn, seeded):
    a, b = randn(4096, gen=seeded, dtype=torch.float16), randn(4096, gen=seeded, dtype=torch.float16)
    got = on_mlu(fn, a, b)
    expected = npfn(a.numpy().astype(np.float64), b.numpy().astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_float16_sum_accumulates_in_float32(seeded):
    a = (randn(8192, gen=seeded, dtype=torch.float32).abs() + 1).to(torch.float16)
    got = on_mlu(torch.sum, a)
    exact = a.numpy().astype(np.float64).sum()
    assert got.dtype == torch.float16
    assert _fp16_ulps(got, np.array(exact)).max() <= 1
    sequential_fp16 = np.float16(0)
    for value in a.numpy():
        sequential_fp16 = np.float16(sequential_fp16 + value)
    assert abs(float(sequential_fp16) - exact) > 50 * abs(float(got) - exact)


def test_float16_softmax_within_one_ulp_of_exact(seeded):
    x = randn(16, 100, gen=seeded, dtype=torch.float16)
    got = on_mlu(lambda t: torch.softmax(t, dim=1), x)
    x64 = x.numpy().astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    assert _fp16_ulps(got, e / e.sum(axis=1, keepdims=True)).max() <= 1


def test_float32_elementwise_is_exact_float32(seeded):
    a, b = randn(4096, gen=seeded), randn(4096, gen=seeded)
    np.testing.assert_array_equal(on_mlu(torch.add, a, b).numpy(), (a.numpy() + b.numpy()).astype(np.float32))


def test_invalid_core_version_lists_valid_versions():
    with pytest.raises(ValueError, match="MLU270.*MLU370"):
        numerics.set_core_version("MLU100")
