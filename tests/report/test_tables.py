import math

import pytest

from mluverify.report.tables import (
    STATUSES, case_list, dump_dir, error_points, overview, pass_matrix, summarize, totals, worst_cases,
)

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


@pytest.fixture
def every_status():
    """One op, one target: a record of each status (hand-picked values)."""
    return as_frame([
        make_record("c[passed]", 0.001),
        make_record("c[failed]", 0.006),
        make_record("c[errored]", math.nan, passed=False, error="RuntimeError: boom"),
        make_record("c[waived]", 0.005, waived=True),
        make_record("c[not_on_device]", 0.0005, status="not_on_device", fallback_ops="aten::add.Tensor",
                    op_on_cpu=True),
        make_record("c[not_fused]", 0.002, status="not_fused", executed_as="layer-by-layer",
                    not_fused_reason="graph break"),
        make_record("c[nondeterministic]", 0.0015, status="nondeterministic"),
    ])


def test_summary_per_op_target_dtype(frame):
    summary = summarize(frame).set_index(["op", "target"])
    add = summary.loc[("add", "mlu:cnnl")]
    assert add["cases"] == 3 and add["failed"] == 1 and add["passed"] == 2
    assert add["pass_rate"] == pytest.approx(2 / 3)
    assert add["median"] == pytest.approx(0.002)
    # linear interpolation at 0.99 * (3 - 1) = 1.98 between 0.002 and 0.004
    assert add["p99"] == pytest.approx(0.002 + 0.98 * 0.002)
    assert add["max"] == pytest.approx(0.004)
    assert add["bound"] == 0.003
    assert add["min_headroom"] == pytest.approx(0.003 / 0.004)
    assert add["fallbacks"] == 1
    assert summary.loc[("add", "mlu:cnml"), "min_headroom"] == pytest.approx(2.0)
    # an errored case is counted as errored, not as failed
    mul = summary.loc[("mul", "mlu:cnnl")]
    assert (mul["errored"], mul["failed"], mul["worst"]) == (1, 0, "errored")


def test_summary_counts_each_status_apart(every_status):
    row = summarize(every_status).iloc[0]
    assert {s: row[s] for s in STATUSES} == dict.fromkeys(STATUSES, 1)
    assert row["cases"] == 7 and row["pass_rate"] == pytest.approx(1 / 7)
    assert row["worst"] == "errored"


def test_summary_lists_the_lowest_pass_rate_first(frame):
    order = summarize(frame)[["op", "target"]].values.tolist()
    # mul 0/1, add@cnnl 2/3, add@cnml 1/1
    assert order == [["mul", "mlu:cnnl"], ["add", "mlu:cnnl"], ["add", "mlu:cnml"]]


def test_pass_matrix_is_op_by_target_and_dtype(frame):
    matrix = pass_matrix(frame)
    assert matrix.loc["add", "mlu:cnnl float32"] == pytest.approx(2 / 3)
    assert matrix.loc["add", "mlu:cnml float32"] == 1.0
    assert matrix.loc["mul", "mlu:cnnl float32"] == 0.0
    assert math.isnan(matrix.loc["mul", "mlu:cnml float32"])


def test_only_passed_counts_as_a_pass(every_status):
    assert pass_matrix(every_status).iloc[0, 0] == pytest.approx(1 / 7)


def test_worst_cases_list_statuses_in_order_then_least_headroom(frame, every_status):
    assert worst_cases(frame, 4)["case_id"].tolist() == ["mul[1]", "add[3]", "add[2]", "add[4]"]
    assert worst_cases(every_status)["status"].tolist() == list(STATUSES)


def test_error_points_keep_errored_and_unjudged_cases():
    points = error_points(as_frame([
        make_record("a", 0.0015),                                         # half the bound
        make_record("b", math.nan, passed=False, error="boom"),           # no value
        make_record("c", 0.0, bound=0.0, metric="exact"),                 # exact and bit-exact
        make_record("d", 3.0, bound=0.0, metric="exact", passed=False),   # 3 elements differ
        make_record("e", 0.006, status="not_fused"),
    ])).set_index(["op", "status"])["ratio"].tolist()
    assert points[0] == pytest.approx(0.5) and math.isnan(points[1])
    assert points[2] == 0.0 and points[3] == math.inf and points[4] == pytest.approx(2.0)


def test_totals_count_each_status(frame, every_status):
    row = totals(frame).iloc[0]
    assert (row["records"], row["cases"], row["failed"], row["errored"], row["with_fallbacks"]) == (5, 5, 1, 1, 1)
    assert totals(every_status).iloc[0][list(STATUSES)].tolist() == [1] * 7


@pytest.mark.parametrize("reproducer, expected", [
    ("pytest 't[a]'; dump: /tmp/run.running/dumps/t_a_", "dumps/t_a_"),
    ("pytest 't[a]'; dump: reports/latest/dumps/t_a__1", "dumps/t_a__1"),
    ("pytest 't[a]'", ""),
    ("pytest 't[a]'; dump: /elsewhere/t_a_", ""),    # not a run's dumps/ folder
    (None, ""),
])
def test_dump_dir_is_relative_to_the_run(reproducer, expected):
    assert dump_dir(reproducer) == expected


def test_case_list_is_failures_first_with_a_runnable_reproducer(every_status):
    frame = as_frame([make_record("t[x]", 0.004, reproducer="pytest 't[x]'; dump: /r/dumps/t_x_"),
                      make_record("t[y]", 0.001)])
    cases = case_list(frame)
    assert cases["case_id"].tolist() == ["t[x]", "t[y]"]
    assert cases.loc[0, "reproducer"] == "pytest 't[x]'" and cases.loc[0, "dump"] == "dumps/t_x_"
    assert case_list(every_status)["status"].tolist() == list(STATUSES)


def test_overview_reads_metadata_and_records(frame):
    metadata = {"run_id": "r1", "mluverify_version": "0.1.0", "torch_version": "2.14.1", "python_version": "3.11.2",
                "host": "h", "machine": "x86_64, 2 CPUs", "platform": "Linux", "started": "2026-01-01T00:00:00+00:00",
                "finished": "2026-01-01T00:02:05+00:00", "command": "mluverify run", "git_revision": "abc"}
    items = dict(overview(frame.assign(core_version=["MLU370", "", None, "MLU270", ""]), metadata).values.tolist())
    assert items["targets"] == "mlu:cnml, mlu:cnnl"
    assert items["core versions"] == "MLU270, MLU370, default"
    assert items["duration"] == "125 s"
    assert items["seeds"] == "per case: 1 distinct, 0..0"
    assert items["machine"] == "h, x86_64, 2 CPUs, Linux" and items["Python"] == "3.11.2"
    assert dict(overview(frame, {}).values.tolist())["duration"].endswith("(run end not recorded)")


def test_summary_shows_the_raw_error_the_eps_rule_zeroed():
    # Two rel_mse cases judged 0: one bit-exact, one whose raw rel_mse 1.2e-4 the eps rule
    # zeroed; a third judged 0.001 as it is. The judged median and max stay Cambricon's.
    frame = as_frame([
        make_record("exp[1]", 0.0, op="exp", raw_rel_mse=0.0, eps_zeroed=False),
        make_record("exp[2]", 0.0, op="exp", raw_rel_mse=1.2e-4, eps_zeroed=True),
        make_record("exp[3]", 0.001, op="exp", raw_rel_mse=0.001, eps_zeroed=False),
        make_record("log[1]", 0.0, op="log", raw_rel_mse=0.0, eps_zeroed=False),
    ])
    summary = summarize(frame).set_index("op")
    assert summary.loc["exp", "max"] == pytest.approx(0.001)
    assert summary.loc["exp", "median"] == 0.0
    assert summary.loc["exp", "eps_zeroed"] == 1
    assert summary.loc["exp", "raw_max"] == pytest.approx(0.001)
    assert (summary.loc["log", "eps_zeroed"], summary.loc["log", "raw_max"]) == (0, 0.0)
    only_zeroed = summarize(frame[frame.case_id == "exp[2]"]).iloc[0]
    assert (only_zeroed["max"], only_zeroed["raw_max"]) == (0.0, pytest.approx(1.2e-4))
