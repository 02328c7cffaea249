"""Verdicts: NaN/Inf masks, shape/dtype mismatches, exact outputs, nested outputs, messages."""
import collections
import math

import numpy as np
import pytest
import torch

from mluverify.judge import Tolerance, assert_close, compare


def test_cnnl_and_cnml_policies_bound_rel_mse_at_0_3_and_2_percent():
    e = torch.ones(100)
    assert compare(e * 1.002, e, mode="cnnl").passed
    assert not compare(e * 1.004, e, mode="cnnl").passed
    assert compare(e * 1.019, e, mode="cnml").passed
    assert not compare(e * 1.021, e, mode="cnml").passed


def test_verdict_holds_value_bound_headroom_and_diagnostics():
    e = torch.ones(100)
    verdict = compare(e * 1.001, e, mode="cnnl")
    assert verdict.metric == "rel_mse"
    assert verdict.value == pytest.approx(0.001, rel=1e-4)
    assert verdict.bound == 0.003
    assert verdict.headroom == pytest.approx(3.0, rel=1e-3)
    assert set(verdict.diagnostics) >= {"rae", "rma", "max_abs", "max_rel", "cosine", "sqnr_db"}


def test_matching_nan_and_inf_positions_are_excluded():
    e = torch.tensor([math.nan, math.inf, -math.inf, 1.0, 2.0])
    a = torch.tensor([math.nan, math.inf, -math.inf, 1.0, 2.0])
    verdict = compare(a, e)
    assert verdict.passed and verdict.value == 0.0


@pytest.mark.parametrize("actual", [
    [0.0, math.inf, -math.inf, 1.0],        # NaN expected, 0 given
    [math.nan, -math.inf, -math.inf, 1.0],  # +inf expected, -inf given
    [math.nan, math.inf, -math.inf, math.nan],  # finite expected, NaN given
])
def test_a_differing_nan_or_inf_position_fails_naming_the_count(actual):
    e = torch.tensor([math.nan, math.inf, -math.inf, 1.0])
    verdict = compare(torch.tensor(actual), e)
    assert not verdict.passed
    assert verdict.nan_mismatch == 1
    assert "1 NaN/Inf position(s) differ" in verdict.reason


def test_shape_and_dtype_mismatches_are_failed_verdicts_showing_both():
    shape = compare(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not shape.passed and "[2, 3]" in shape.reason and "[3, 2]" in shape.reason
    dtype = compare(torch.zeros(2, dtype=torch.float16), torch.zeros(2))
    assert not dtype.passed and "float16" in dtype.reason and "float32" in dtype.reason


def test_integer_and_bool_outputs_are_judged_bit_exact_in_any_mode():
    assert compare(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3]), mode="cnml").passed
    off_by_one = compare(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]), mode="cnml")
    assert not off_by_one.passed and off_by_one.value == 1 and off_by_one.metric == "exact"
    assert not compare(torch.tensor([True, False]), torch.tensor([True, True])).passed


def test_nested_outputs_are_walked_and_the_failing_leaf_is_named():
    Out = collections.namedtuple("Out", "logits aux")
    e = Out(torch.ones(4), {"boxes": [torch.ones(2), torch.ones(3)]})
    a = Out(torch.ones(4), {"boxes": [torch.ones(2), torch.ones(3) * 2]})
    verdict = compare(a, e)
    assert not verdict.passed
    assert verdict.leaf == "[1]['boxes'][1]"
    assert compare(e, e).passed


def test_structure_mismatch_is_a_failed_verdict():
    verdict = compare((torch.ones(1),), (torch.ones(1), torch.ones(1)))
    assert not verdict.passed and "length 1" in verdict.reason and "length 2" in verdict.reason


def test_tolerance_override_by_number_and_by_metric():
    e = torch.ones(10)
    assert compare(e * 1.01, e, tolerance=0.02).passed
    verdict = compare(e * 1.01, e, tolerance=Tolerance("max_abs", 0.001))
    assert not verdict.passed and verdict.metric == "max_abs"


def test_unknown_metric_or_policy_is_an_error_naming_it():
    with pytest.raises(ValueError, match="cosine"):
        Tolerance("cosine", 0.1)
    with pytest.raises(ValueError, match="'fast'.*'cnml'"):
        compare(torch.ones(1), torch.ones(1), mode="fast")


def test_assert_close_shows_metric_bound_headroom_and_worst_elements():
    e = torch.zeros(3, 4) + 1
    a = e.clone()
    a[2, 1] = 5.0
    with pytest.raises(AssertionError) as info:
        assert_close(a, e)
    text = str(info.value)
    assert "rel_mse" in text and "bound 0.003" in text and "Headroom" in text
    assert "(2, 1): 5 vs 1" in text


def test_numpy_arrays_and_python_numbers_are_leaves():
    assert compare(np.ones(3, dtype=np.float32), np.ones(3, dtype=np.float32)).passed
    assert compare(1.0, 1.0).passed
    assert not compare(2, 1).passed


def test_the_reason_says_when_the_eps_rule_decided_rel_mse():
    expected = np.full(4, 0.01)
    verdict = compare(expected * (1 + 1.5e-4), expected)
    # each element is off by 1.5e-6: total squared error 4 x 2.25e-12 = 9e-12 <= (2/16384)^2 = 1.5e-8,
    # so the judged rel_mse is 0; the raw one is 1.5e-6 / 0.01 = 1.5e-4
    assert verdict.passed and verdict.value == 0.0 and verdict.eps_zeroed
    assert verdict.diagnostics["raw_rel_mse"] == pytest.approx(1.5e-4)
    assert verdict.reason == ("rel_mse 0 (raw 0.00015, zeroed by the eps rule: total squared error 9e-12 "
                              "<= (2 eps)^2) <= bound 0.003 (policy:cnnl)")


def test_a_rel_mse_above_the_eps_floor_says_nothing_about_it():
    expected = np.full(4, 1.0)
    verdict = compare(expected * (1 + 1e-3), expected)  # squared error 4e-6 > 1.5e-8: not zeroed
    assert not verdict.eps_zeroed and verdict.diagnostics["raw_rel_mse"] == pytest.approx(1e-3)
    assert verdict.reason == f"rel_mse {verdict.value:.4g} <= bound 0.003 (policy:cnnl)"
