"""The golden (float64) reference, and the judge's blind spots made visible: NaN everywhere,
the eps floor, NaN/Inf mismatches named by position. Every expected number is derived in the
comments from the values written here."""
import math

import numpy as np
import pytest

from mluverify.judge import GOLDEN_RULES, GoldenRule, compare
from mluverify.judge._judge import SMALL_VALUE_ATOL
from mluverify.errors import InvalidArgument


def test_golden_rule_follows_dynamo_same_with_a_roundoff_floor():
    rule = GOLDEN_RULES["float32"]
    assert (rule.k, rule.floor) == (2.0, 2 * 2.0**-24)
    assert rule.bound(0.01, numel=4096) == pytest.approx(2 * 0.01 + 2**-23)
    assert rule.bound(0.01, numel=999) == pytest.approx(3 * 0.01 + 2**-23)  # small tensors: k = 3
    assert GOLDEN_RULES["float16"].k == 3.0 and GOLDEN_RULES["float16"].floor == 2 * 2.0**-11


@pytest.mark.parametrize("k, floor", [(0, 1e-7), (-1, 1e-7), (2, -1e-9)])
def test_golden_rule_rejects_non_positive_k_and_negative_floor(k, floor):
    with pytest.raises(InvalidArgument, match="k must be a number > 0|floor must be a number >= 0"):
        GoldenRule(k, floor)


def _cancelling_sum_vectors(n=2048):
    """A reduction whose float32 CPU result is badly off: pairs (big, -big) with a small term.

    Golden: the exact sum of the small terms (all 1.0) is ``n``. Say the CPU's float32
    accumulation absorbed 3/4 of the small terms into the big partial sums (result n/4) and the
    device, accumulating differently, lost half of them (result n/2). Per element these are the
    row sums of an (n, 4096) problem; here the outputs are given directly.
    """
    golden = np.full(n, 2048.0)
    cpu = np.full(n, 512.0, dtype=np.float32)
    device = np.full(n, 1024.0, dtype=np.float32)
    return device, cpu, golden


def test_a_bad_cpu_reference_fails_rel_mse_but_passes_golden():
    device, cpu, golden = _cancelling_sum_vectors()
    # rel_mse against the CPU: |1024 - 512| / 512 = 1.0 > 0.003
    plain = compare(device, cpu, mode="cnnl")
    assert not plain.passed and plain.value == pytest.approx(1.0)
    # device error vs float64: |1024 - 2048| / 2048 = 0.5; the CPU's: |512 - 2048| / 2048 = 0.75;
    # 0.5 <= 2 x 0.75 + 2^-23 (2048 elements: k = 2)
    golden_verdict = compare(device, cpu, mode="golden", golden=golden)
    assert golden_verdict.passed
    assert golden_verdict.device_error == pytest.approx(0.5)
    assert golden_verdict.reference_error == pytest.approx(0.75)
    assert golden_verdict.bound == pytest.approx(1.5 + 2**-23)


def test_a_device_worse_than_the_cpu_fails_golden():
    golden = np.linspace(1.0, 2.0, 4096)
    cpu = golden.astype(np.float32)  # one float32 rounding: relative error <= 2^-24
    device = (golden * 1.001).astype(np.float32)  # 0.1 % off
    verdict = compare(device, cpu, mode="golden", golden=golden)
    assert not verdict.passed
    assert verdict.device_error == pytest.approx(1e-3, rel=1e-3)
    assert verdict.reference_error < 2**-24
    assert verdict.bound == pytest.approx(2 * verdict.reference_error + 2**-23)
    assert "golden: device rel_mse" in verdict.reason and ">" in verdict.reason


def test_other_policies_still_record_the_golden_errors():
    golden = np.linspace(1.0, 2.0, 64)
    device, cpu = (golden * 1.0005).astype(np.float32), golden.astype(np.float32)
    verdict = compare(device, cpu, mode="cnnl", golden=golden)
    assert verdict.passed and verdict.metric == "rel_mse" and verdict.bound == 0.003
    assert verdict.device_error == pytest.approx(5e-4, rel=1e-3)
    assert "Against float64" in compare(device * 2, cpu, golden=golden).message


def test_an_all_nan_output_is_nothing_compared_and_fails_unless_expected():
    nan = np.full(100, np.nan, dtype=np.float32)
    verdict = compare(nan, nan.copy())
    assert not verdict.passed and verdict.nothing_compared
    assert "nothing compared: all 100 elements are NaN/Inf" in verdict.reason
    assert compare(nan, nan.copy(), expect_non_finite=True).passed


def test_the_eps_floor_blind_spot_is_flagged_and_judged_by_max_abs():
    # sum(e^2) = 100 x 1e-10 = 1e-8 <= eps and the squared error 1e-8 <= (2 eps)^2: rel_mse = 0
    verdict = compare(np.zeros(100, dtype=np.float32), np.full(100, 1e-5, dtype=np.float32), mode="cnnl")
    assert verdict.diagnostics["rel_mse"] == 0.0
    assert not verdict.passed and verdict.metric == "max_abs"
    # allowed: bound x max|e| + float32 small-value atol = 0.003 x 1e-5 + 2^-30
    assert verdict.bound == pytest.approx(0.003 * 1e-5 + 2.0**-30, rel=1e-6)
    assert "Cambricon's eps floor decides rel_mse" in verdict.reason


def test_under_the_eps_floor_a_close_result_still_passes_and_says_why():
    expected = np.full(100, 1e-5, dtype=np.float32)
    actual = expected * np.float32(1.01)  # 1 % off: raw rel_mse 0.01 > 0.003, the eps rules give 0
    verdict = compare(actual, expected, mode="cnnl")
    # max_abs 1e-7 > 0.003 x 1e-5 + 2^-30 = 3.09e-8: the second check catches the hidden 1 %
    assert not verdict.passed and verdict.metric == "max_abs"
    close = expected * np.float32(1.0001)  # 0.01 %: within the bound even without the eps rules
    verdict = compare(close, expected, mode="cnnl")
    assert verdict.passed and "eps floor" not in verdict.reason
    assert SMALL_VALUE_ATOL["float16"] == 2.0**-16


def test_the_second_check_passes_a_tiny_reference_matched_closely():
    expected = np.full(4, 1e-5, dtype=np.float32)
    actual = expected.copy()
    actual[0] = np.float32(1.0e-5) + np.float32(2e-8)  # raw rel_mse 1e-3: the eps rules are not needed
    assert compare(actual, expected, mode="cnnl").passed
    zeros = np.zeros(4, dtype=np.float32)
    tiny = np.full(4, 2.0**-31, dtype=np.float32)  # max_abs 4.7e-10 <= 0.003 x 0 + 2^-30
    verdict = compare(tiny, zeros, mode="cnnl")
    assert verdict.passed and "also checked" in verdict.reason


def test_nan_inf_mismatches_name_the_first_positions_and_the_side():
    expected = np.ones((3, 4), dtype=np.float32)
    actual = expected.copy()
    actual[0, 1], actual[2, 2] = np.nan, np.inf
    expected[1, 3] = -np.inf
    verdict = compare(actual, expected)
    assert verdict.nan_mismatch == 3
    assert verdict.reason == (
        "3 NaN/Inf position(s) differ between actual and expected: "
        "(0, 1): actual nan vs expected 1 (actual non-finite); "
        "(1, 3): actual 1 vs expected -inf (expected non-finite); "
        "(2, 2): actual inf vs expected 1 (actual non-finite)")


def test_many_nan_mismatches_are_counted_beyond_the_first_five():
    actual = np.full(8, np.nan, dtype=np.float32)
    verdict = compare(actual, np.zeros(8, dtype=np.float32))
    assert verdict.reason.endswith("... (3 more)")
    assert math.isnan(verdict.value)
