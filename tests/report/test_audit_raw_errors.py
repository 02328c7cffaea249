"""The audit reads raw errors: a rel_mse the eps rule zeroed is not "exact", and recommended
bounds come from the raw values, never below the golden reference error, never admitting a
failing case without listing it."""
import math

import pytest

from mluverify.report.audit import audit_runs

from report_records import as_frame, make_record

ONE_ULP = 2.0 ** -23  # float32 spacing at values in [1, 2): results 1 ULP off everywhere
# ||a - e|| / ||e|| = 2^-23 for a result off by 2^-23 at every element of a reference of ones
ONE_ULP_SQNR_DB = -20 * math.log10(ONE_ULP)


def _bit_exact(case_id: str, op: str) -> dict:
    return make_record(case_id, 0.0, op=op, max_abs=0.0, sqnr_db=math.inf, raw_rel_mse=0.0, eps_zeroed=False)


def _one_ulp_off(case_id: str, op: str) -> dict:
    # the judged rel_mse is 0: 8 x (2^-23)^2 is far below the eps rule's (2/16384)^2
    return make_record(case_id, 0.0, op=op, max_abs=ONE_ULP, sqnr_db=ONE_ULP_SQNR_DB, raw_rel_mse=ONE_ULP,
                       eps_zeroed=True)


@pytest.fixture
def groups():
    rows = [_bit_exact("copy[1]", "copy"), _bit_exact("copy[2]", "copy"),
            _one_ulp_off("softmax[1]", "softmax"), _one_ulp_off("softmax[2]", "softmax"),
            _bit_exact("relu[1]", "relu"), _one_ulp_off("relu[2]", "relu")]
    return audit_runs([as_frame(rows)]).groups.set_index("op")


def test_only_the_bit_exact_group_is_exact(groups):
    assert groups.loc["copy", "verdict"] == "exact" and groups.loc["copy", "recommended_policy"] == "exact"
    for op in ("softmax", "relu"):
        assert groups.loc[op, "verdict"] != "exact" and groups.loc[op, "recommended_policy"] == ""


def test_the_recommendation_comes_from_the_raw_error_beside_the_eps_zeroed_count(groups):
    softmax = groups.loc["softmax"]
    assert softmax["max_passing"] == 0.0  # what the eps rule judged
    assert softmax["max_passing_raw"] == pytest.approx(ONE_ULP)
    assert softmax["eps_zeroed"] == 2
    assert softmax["recommended_bound"] == 2.4e-7  # 2 x 1.19e-7 = 2.38e-7, rounded up
    assert groups.loc["relu", "eps_zeroed"] == 1 and groups.loc["copy", "eps_zeroed"] == 0


def test_the_recommendation_is_never_below_the_golden_reference_error():
    rows = [make_record("sum[1]", 1e-4, op="sum", raw_rel_mse=1e-4, reference_error=0.0, device_error=1e-4),
            make_record("sum[2]", 1e-4, op="sum", raw_rel_mse=1e-4, reference_error=5e-4, device_error=1e-4)]
    total = audit_runs([as_frame(rows)]).groups.set_index("op").loc["sum"]
    # raw 1e-4 x 2 = 2e-4; the CPU itself misses float64 by 5e-4
    assert total["recommended_bound"] == 5e-4


def test_every_failing_case_the_recommendation_would_admit_is_listed():
    rows = [make_record("mul[ok]", 0.0028, op="mul", sqnr_db=-20 * math.log10(0.0028))]
    rows += [make_record(f"mul[bad{i}]", 0.004, op="mul") for i in range(12)]
    mul = audit_runs([as_frame(rows)]).groups.set_index("op").loc["mul"]
    assert mul["recommended_bound"] == 0.0056
    assert mul["admits"].count("(0.004)") == 12


def test_a_non_zero_rel_mse_keeps_its_value_against_a_zero_reference():
    # all-zero reference: the raw rel_mse is infinite (sqnr -inf); the judged 1e-3 (the eps rule
    # adds eps to the reference energy) was not zeroed, so it stays what the bound is set from
    rows = [make_record("mean[1]", 1e-3, op="mean", max_abs=1e-5, sqnr_db=-math.inf, raw_rel_mse=math.inf,
                        eps_zeroed=False)]
    mean = audit_runs([as_frame(rows)]).groups.set_index("op").loc["mean"]
    assert mean["max_passing_raw"] == 1e-3 and mean["recommended_bound"] == 0.002


def test_records_older_than_version_4_get_their_raw_values_from_sqnr_db(tmp_path):
    import pyarrow.parquet as pq

    from mluverify.report.loading import load
    from mluverify.report.records import to_table

    rows = [make_record("softmax[1]", 0.0, op="softmax", max_abs=ONE_ULP, sqnr_db=ONE_ULP_SQNR_DB),
            make_record("copy[1]", 0.0, op="copy", max_abs=0.0, sqnr_db=math.inf),
            make_record("abs[1]", 0.0, op="abs", metric="max_abs", sqnr_db=math.inf)]
    old = to_table(rows, {"schema_version": 3}).drop_columns(["raw_rel_mse", "eps_zeroed", "ulp_max", "ulp_p99"])
    (tmp_path / "run").mkdir()
    pq.write_table(old, tmp_path / "run" / "records.parquet")
    loaded = load(tmp_path / "run").set_index("op")
    # 10^(-sqnr_db / 20) undoes sqnr_db = -20 log10(2^-23)
    assert loaded.loc["softmax", "raw_rel_mse"] == pytest.approx(ONE_ULP)
    assert loaded.loc["softmax", "eps_zeroed"] == True  # noqa: E712 (a numpy bool)
    assert loaded.loc["copy", "raw_rel_mse"] == 0.0 and loaded.loc["copy", "eps_zeroed"] == False  # noqa: E712
    assert loaded.loc["abs", "eps_zeroed"] is None  # no eps rule outside rel_mse
    assert math.isnan(loaded.loc["softmax", "ulp_max"])  # never measured: absent, not 0
    groups = audit_runs([loaded.reset_index()]).groups.set_index("op")
    assert groups.loc["softmax", "verdict"] != "exact" and groups.loc["softmax", "max_passing_raw"] == pytest.approx(ONE_ULP)


def test_verdict_and_headroom_follow_the_raw_error_not_the_eps_zeroed_value():
    # a 1 % planted gelu bug on mlu:cnml: the eps rule judged its rel_mse 0, its raw rel_mse is
    # 0.01 under the 0.02 bound: headroom 2, "ok", not an infinite headroom and "too loose"
    rows = [make_record(f"gelu[{i}]", 0.0, op="gelu", target="mlu:cnml", bound=0.02, max_abs=1e-3,
                        raw_rel_mse=0.01, eps_zeroed=True) for i in range(3)]
    gelu = audit_runs([as_frame(rows)]).groups.set_index("op").loc["gelu"]
    assert (gelu["max_passing"], gelu["max_passing_raw"]) == (0.0, 0.01)
    assert gelu["headroom"] == pytest.approx(2.0)
    assert gelu["verdict"] == "ok" and gelu["recommended_bound"] == 0.02


def test_the_summarys_min_headroom_follows_the_raw_error():
    from mluverify.report.tables import summarize

    rows = [make_record("gelu[1]", 0.0, op="gelu", bound=0.02, raw_rel_mse=0.01, eps_zeroed=True),
            make_record("gelu[2]", 0.001, op="gelu", bound=0.02, raw_rel_mse=0.001, eps_zeroed=False)]
    summary = summarize(as_frame(rows)).set_index("op")
    assert summary.loc["gelu", "min_headroom"] == pytest.approx(2.0)  # 0.02 / raw 0.01, not 0.02 / 0 = inf
