import math

import pytest

from mluverify.report.tables import pass_matrix, summarize, totals, worst_cases

from report_records import as_frame, make_record


@pytest.fixture
def frame():
    return as_frame([
        make_record("add[1]", 0.001),
        make_record("add[2]", 0.002, fallback_ops="aten::erf"),
        make_record("add[3]", 0.004),                       # fails: 0.004 > 0.003
        make_record("add[4]", 0.01, target="mlu:cnml", bound=0.02),
        make_record("mul[1]", math.nan, op="mul", passed=False, error="RuntimeError: boom"),
    ])


def test_summary_per_op_target_dtype(frame):
    summary = summarize(frame).set_index(["op", "target"])
    add = summary.loc[("add", "mlu:cnnl")]
    assert add["cases"] == 3 and add["failed"] == 1
    assert add["pass_rate"] == pytest.approx(2 / 3)
    assert add["median"] == pytest.approx(0.002)
    # linear interpolation at 0.99 * (3 - 1) = 1.98 between 0.002 and 0.004
    assert add["p99"] == pytest.approx(0.002 + 0.98 * 0.002)
    assert add["max"] == pytest.approx(0.004)
    assert add["bound"] == 0.003
    assert add["min_headroom"] == pytest.approx(0.003 / 0.004)
    assert add["fallbacks"] == 1
    assert summary.loc[("add", "mlu:cnml"), "min_headroom"] == pytest.approx(2.0)
    assert summary.loc[("mul", "mlu:cnnl"), "failed"] == 1


def test_pass_matrix_is_op_by_target(frame):
    matrix = pass_matrix(frame)
    assert matrix.loc["add", "mlu:cnnl"] == pytest.approx(2 / 3)
    assert matrix.loc["add", "mlu:cnml"] == 1.0
    assert matrix.loc["mul", "mlu:cnnl"] == 0.0
    assert math.isnan(matrix.loc["mul", "mlu:cnml"])


def test_worst_cases_lists_errors_then_failures_then_least_headroom(frame):
    assert worst_cases(frame, 4)["case_id"].tolist() == ["mul[1]", "add[3]", "add[2]", "add[4]"]


def test_totals(frame):
    row = totals(frame).iloc[0]
    assert (row["records"], row["cases"], row["failed"], row["errored"], row["with_fallbacks"]) == (5, 5, 2, 1, 1)
