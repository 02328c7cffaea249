"""Metric values against numbers derived by hand from the definitions (README, "The judge")."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mluverify.judge import EPS, cosine, max_abs, max_rel, metrics, rae, rel_mse, rma, sqnr_db


def arr(*values):
    return np.array(values, dtype=np.float64)


def test_rel_mse_is_root_of_squared_error_over_squared_reference():
    # sum (a-e)^2 = 1, sum e^2 = 1 + 4 + 4 = 9 -> sqrt(1/9)
    assert rel_mse(arr(1, 2, 3), arr(1, 2, 2)) == pytest.approx(1 / 3)


def test_rel_mse_counts_a_total_squared_error_within_2eps_squared_as_zero():
    # squared error 1e-10 <= (2 / 16384)^2 = 1.49e-8
    assert rel_mse(arr(1 + 1e-5, 1, 1, 1), arr(1, 1, 1, 1)) == 0.0
    # just above the threshold it counts: squared error 4e-8 over 4 -> sqrt(1e-8)
    assert rel_mse(arr(1 + 2e-4, 1, 1, 1), arr(1, 1, 1, 1)) == pytest.approx(math.sqrt(4e-8 / 4), rel=1e-6)


def test_rel_mse_adds_eps_to_a_near_zero_reference():
    # sum e^2 = 0 <= eps, so the denominator becomes eps: sqrt(1e-4 / (1/16384)) = sqrt(1.6384)
    assert rel_mse(arr(0.01, 0), arr(0, 0)) == pytest.approx(math.sqrt(1e-4 * 16384))
    # sum e^2 = 1e-5 <= eps too: denominator 1e-5 + eps
    assert rel_mse(arr(0.01, 0), arr(0, math.sqrt(1e-5))) == pytest.approx(
        math.sqrt((1e-4 + 1e-5) / (1e-5 + EPS)))


def test_rae_and_its_zero_reference_rule():
    assert rae(arr(1, 2, 3), arr(1, 2, 2)) == pytest.approx(1 / 5)
    assert rae(arr(0, 0), arr(0, 0)) == 0.0
    assert rae(arr(0, 1), arr(0, 0)) == math.inf


def test_rma_compares_mean_absolute_values():
    # mean|e| = 2, mean|a| = 7/3 -> (1/3) / 2
    assert rma(arr(1, 2, 4), arr(1, -2, 3)) == pytest.approx(1 / 6)
    assert rma(arr(0, 0), arr(0, 0)) == 0.0


def test_max_abs_and_max_rel_skip_zero_references():
    assert max_abs(arr(1, 2, 3), arr(1, 2, 2)) == 1.0
    assert max_rel(arr(1, 2, 3), arr(1, 2, 2)) == 0.5
    assert max_rel(arr(5, 3), arr(0, 2)) == 0.5


def test_cosine_and_its_zero_vector_rules():
    assert cosine(arr(1, 0), arr(0, 1)) == 0.0
    assert cosine(arr(1, 1), arr(2, 2)) == pytest.approx(1.0)
    assert cosine(arr(0, 0), arr(0, 0)) == 1.0
    assert cosine(arr(1, 0), arr(0, 0)) == 0.0


def test_sqnr_db():
    # ||e|| = 5, ||e-a|| = 0.5 -> 20 log10(10) = 20 dB
    assert sqnr_db(arr(3, 4.5), arr(3, 4)) == pytest.approx(20.0)
    assert sqnr_db(arr(3, 4), arr(3, 4)) == math.inf


def test_combined_metrics_match_the_definitions_one_by_one():
    rng = np.random.default_rng(0)
    e = rng.normal(size=1000)
    a = e + rng.normal(scale=1e-2, size=1000)
    combined = metrics(a, e)
    for name, fn in {"rel_mse": rel_mse, "rae": rae, "rma": rma, "max_abs": max_abs,
                     "max_rel": max_rel, "cosine": cosine, "sqnr_db": sqnr_db}.items():
        assert combined[name] == pytest.approx(fn(a, e), rel=1e-9), name


def test_float32_pairs_longer_than_a_pass_match_the_float64_definitions():
    # all_metrics widens and sums chunk by chunk; the definitions above work on whole float64
    # arrays. The largest error sits in the last, partial chunk.
    rng = np.random.default_rng(1)
    e = rng.normal(size=200_003).astype(np.float32)
    a = (e + rng.normal(scale=1e-3, size=e.size)).astype(np.float32)
    a[-1] = e[-1] + 7
    combined = metrics(a, e)
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    for name, fn in {"rel_mse": rel_mse, "rae": rae, "rma": rma, "max_abs": max_abs,
                     "max_rel": max_rel, "cosine": cosine, "sqnr_db": sqnr_db}.items():
        assert combined[name] == pytest.approx(fn(a64, e64), rel=1e-9), name
    assert combined["max_abs"] == pytest.approx(abs(float(a[-1]) - float(e[-1])))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.5, 100), min_size=4, max_size=64), st.floats(1e-3, 0.5))
def test_rel_mse_of_a_uniform_relative_error_is_that_error(values, delta):
    # a = e (1 + delta) -> sqrt(sum delta^2 e^2 / sum e^2) = delta, whatever e is.
    e = np.array(values)
    assert rel_mse(e * (1 + delta), e) == pytest.approx(delta, rel=1e-9)


def test_metrics_are_computed_in_float64():
    torch = pytest.importorskip("torch")
    # 1 + 2^-30 is not representable in float32 but is in float64
    e = np.array([1.0], dtype=np.float64)
    a = np.array([1.0 + 2 ** -30])
    assert metrics(a, e)["max_abs"] == 2 ** -30
    assert metrics(torch.tensor([3.0]), torch.tensor([3.0], dtype=torch.float16))["max_abs"] == 0.0
