"""ULP error against the golden float64 result, checked against hand-derived values: the ULP at
a golden value is the spacing of the dtype's values in its binade (2^(e - mantissa bits)), the
smallest subnormal below the smallest normal."""
import math

import numpy as np
import pytest

from mluverify.errors import InvalidArgument
from mluverify.judge._metrics import check_ulp_bound, ulp_errors, ulp_metrics, ulp_of


def _ulps(actual, golden, dtype):
    return ulp_errors(np.asarray(actual, dtype=np.float64), np.asarray(golden, dtype=np.float64), dtype)


@pytest.mark.parametrize("actual, golden, dtype, ulps", [
    (1 + 2.0 ** -23, 1.0, "float32", 1.0),       # next float32 above 1
    (1 + 2.0 ** -10, 1.0, "float16", 1.0),       # next float16 above 1
    (1 + 2.0 ** -7, 1.0, "bfloat16", 1.0),       # next bfloat16 above 1
    (1000.5, 1000.0, "float16", 1.0),            # float16 spacing in [512, 1024) is 2^(9-10) = 0.5
    (3.0 + 2.0 ** -22, 3.0, "float32", 1.0),     # spacing in [2, 4) is 2^(1-23)
    (1.0, 1 + 2.0 ** -24, "float32", 0.5),       # a tie rounded to even: correctly rounded, 0.5 exactly
    (4 * 2.0 ** -149, 3 * 2.0 ** -149, "float32", 1.0),  # subnormals: spacing 2^-149
    (2.0 ** -149, 0.0, "float32", 1.0),          # zero: the smallest subnormal
    (7 * 2.0 ** -24, 5 * 2.0 ** -24, "float16", 2.0),    # float16 subnormals: spacing 2^-24
    (-0.0, 0.0, "float32", 0.0),                 # signed zeros are equal
    (0.0, -0.0, "float16", 0.0),
])
def test_ulp_error_of_one_element(actual, golden, dtype, ulps):
    assert _ulps([actual], [golden], dtype)[0] == ulps


def test_a_correctly_rounded_third_is_a_third_of_an_ulp_off():
    # 1/3 = 0.010101...b; float32 keeps 24 significant bits, so it is 2^-25 / 3 below 1/3, and the
    # spacing in [1/4, 1/2) is 2^-25 (the float64 golden 1/3 is itself up to 2^-55 off: 1e-8 ULP)
    assert _ulps([np.float32(1 / 3)], [1 / 3], "float32")[0] == pytest.approx(1 / 3, abs=1e-8)


def test_the_ulp_at_the_smallest_normal_and_below():
    tiny = float(np.finfo(np.float32).tiny)  # 2^-126: spacing 2^-149, as for every subnormal
    assert ulp_of(np.array([tiny, tiny / 2, 0.0]), "float32").tolist() == [2.0 ** -149] * 3


def test_nan_and_inf_positions_are_excluded():
    actual = [math.nan, math.inf, 1 + 2.0 ** -23, 5.0]
    golden = [math.nan, math.inf, 1.0, math.nan]
    assert ulp_metrics(np.array(actual), np.array(golden), "float32") == {"ulp_max": 1.0, "ulp_p99": 1.0}


def test_p99_is_the_error_99_percent_of_the_elements_are_within():
    golden = np.ones(100)
    one_outlier = golden.copy()
    one_outlier[7] = 1 + 3 * 2.0 ** -23      # 99 exact elements, one 3 ULP off
    assert ulp_metrics(one_outlier, golden, "float32") == {"ulp_max": 3.0, "ulp_p99": 0.0}
    two_off = golden.copy()
    two_off[:2] = 1 + 2.0 ** -23            # only 98 % within 0 ULP
    assert ulp_metrics(two_off, golden, "float32") == {"ulp_max": 1.0, "ulp_p99": 1.0}


def test_nothing_compared_is_zero_ulp():
    assert ulp_metrics(np.array([math.nan]), np.array([1.0]), "float32") == {"ulp_max": 0.0, "ulp_p99": 0.0}


def test_a_ulp_bound_below_correctly_rounded_is_refused():
    with pytest.raises(InvalidArgument, match=r"ulp_max bound 0.4 is below 0.5 ULP"):
        check_ulp_bound("ulp_max", 0.4)
    check_ulp_bound("ulp_p99", 0.5)
    check_ulp_bound("rel_mse", 0.001)  # not a ULP metric


def test_an_unknown_dtype_names_the_valid_ones():
    with pytest.raises(InvalidArgument, match="unknown ULP dtype 'int8'.*'float16'"):
        ulp_of(np.array([1.0]), "int8")


# --- the judged path: a policy may bound ULPs against the golden result ---

def _one_ulp_above_ones(size: int = 4):
    """float32 ones, a result 1 ULP (2^-23) above them, and the float64 golden ones."""
    golden = np.ones(size)
    return (golden + 2.0 ** -23).astype(np.float32), golden.astype(np.float32), golden


def test_a_policy_judges_ulp_max_against_the_golden_result():
    from mluverify.judge import Tolerance, compare

    actual, expected, golden = _one_ulp_above_ones()
    verdict = compare(actual, expected, golden=golden, tolerance=Tolerance("ulp_max", 1.0))
    assert verdict.passed and verdict.metric == "ulp_max" and verdict.value == 1.0
    assert verdict.diagnostics["ulp_p99"] == 1.0
    failed = compare(actual, expected, golden=golden, tolerance=Tolerance("ulp_max", 0.5))
    assert not failed.passed and failed.reason == "ulp_max 1 > bound 0.5 (user)"


def test_ulps_are_measured_in_the_case_dtype():
    from mluverify.judge import compare

    actual, expected, golden = _one_ulp_above_ones()
    # a float32 step of 2^-23 is 2^-23 / 2^-10 = 1/8192 of a float16 ULP at 1
    verdict = compare(actual, expected, golden=golden, dtype="float16")
    assert verdict.diagnostics["ulp_max"] == 2.0 ** -13


def test_without_a_golden_result_ulps_are_absent_and_the_mode_policy_judges():
    from mluverify.judge import Tolerance, compare

    actual, expected, _ = _one_ulp_above_ones()
    assert "ulp_max" not in compare(actual, expected).diagnostics
    verdict = compare(actual, expected, mode="cnnl", tolerance=Tolerance("ulp_max", 1.0))
    assert verdict.metric == "rel_mse" and verdict.tolerance_source == "policy:cnnl"
    assert verdict.reason.startswith("ulp_max needs a golden (float64) result and this case has none, "
                                     "so policy:cnnl judged it: rel_mse 0")


def test_a_ulp_tolerance_below_correctly_rounded_is_refused():
    from mluverify.judge import Tolerance

    with pytest.raises(InvalidArgument, match="ulp_p99 bound 0.25 is below 0.5 ULP"):
        Tolerance("ulp_p99", 0.25)


@pytest.mark.parametrize("entry, culprit", [
    ({"metric": "ulp_max", "bound": 0.25}, r"'softmax:float32'.*ulp_max bound 0.25 is below 0.5 ULP"),
    ({"metric": "ulps", "bound": 1.0}, r"'softmax:float32'.*unknown judged metric 'ulps'.*'ulp_max'"),
])
def test_a_config_key_with_a_bad_ulp_tolerance_is_a_start_up_error_naming_it(entry, culprit):
    from mluverify.core.config import parse_settings
    from mluverify.errors import ConfigError

    with pytest.raises(ConfigError, match=culprit):
        parse_settings({"tolerances": {"softmax:float32": entry}})
