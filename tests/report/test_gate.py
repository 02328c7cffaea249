import datetime as dt

import pytest

from mluverify.core.expectations import Waiver
from mluverify.report.gate import evaluate_gate

from report_records import as_frame, make_record

TODAY = dt.date(2026, 6, 1)


def gate(run_rows, base_rows=None, **options):
    options.setdefault("today", TODAY)
    base = None if base_rows is None else as_frame(base_rows)
    return evaluate_gate(as_frame(run_rows), base, **options)


def rules(result):
    return sorted(zip(result.blocking["rule"], result.blocking["case_id"]))


def test_passes_when_every_case_holds_and_matches_the_baseline():
    rows = [make_record("t[a]", 0.001), make_record("t[b]", 0.002)]
    result = gate(rows, rows)
    assert result.passed and result.findings.empty


def test_a_case_breaking_its_tolerance_fails_without_baseline():
    result = gate([make_record("t[a]", 0.001), make_record("t[b]", 0.004)])
    assert not result.passed
    assert rules(result) == [("fails tolerance", "t[b]")]
    assert "0.004 > bound 0.003" in result.blocking["detail"].iloc[0]


def test_new_failure_against_the_baseline():
    result = gate([make_record("t[a]", 0.0031)], [make_record("t[a]", 0.001)])
    assert rules(result) == [("new failure", "t[a]")]


def test_known_failure_still_fails_tolerance():
    result = gate([make_record("t[a]", 0.004)], [make_record("t[a]", 0.005)])
    assert rules(result) == [("fails tolerance", "t[a]")]


def test_worsened_beyond_the_regress_factor():
    base = [make_record("t[a]", 0.001), make_record("t[b]", 0.001)]
    run = [make_record("t[a]", 0.0016), make_record("t[b]", 0.0014)]  # 1.6x and 1.4x
    result = gate(run, base, regress_factor=1.5)
    assert rules(result) == [("worsened", "t[a]")]
    assert result.blocking["baseline_value"].iloc[0] == pytest.approx(0.001)


def test_growth_under_the_noise_floor_is_ignored():
    base, run = [make_record("t[a]", 1e-7)], [make_record("t[a]", 1e-6)]  # 10x, but tiny
    assert rules(gate(run, base, noise_floor=0.0)) == [("worsened", "t[a]")]
    assert gate(run, base, noise_floor=1e-5).passed
    # above the floor, growth counts from the floor: 1.6e-5 > 1.5 x max(1e-7, 1e-5)
    assert rules(gate([make_record("t[a]", 1.6e-5)], base, noise_floor=1e-5)) == [("worsened", "t[a]")]


def test_baseline_case_missing_from_the_run():
    result = gate([make_record("t[a]", 0.001)], [make_record("t[a]", 0.001), make_record("t[gone]", 0.001)])
    assert rules(result) == [("missing", "t[gone]")]


def test_marker_waiver_reports_but_does_not_block():
    result = gate([make_record("t[a]", 0.004, waived=True)])
    assert result.passed
    assert result.findings[["rule", "waiver"]].values.tolist() == [["fails tolerance", "waived when it ran"]]


def test_configured_waiver_matches_case_id_globs():
    waivers = {"t[a*": Waiver("known fp16 issue", dt.date(2026, 12, 31))}
    result = gate([make_record("t[a1]", 0.004), make_record("t[b]", 0.004)], waivers=waivers)
    assert rules(result) == [("fails tolerance", "t[b]")]
    waived = result.findings[result.findings["waiver"] != ""]
    assert waived["case_id"].tolist() == ["t[a1]"]
    assert "known fp16 issue" in waived["waiver"].iloc[0]


def test_waiver_is_valid_through_its_until_date():
    waivers = {"t*": Waiver("r", TODAY)}
    assert gate([make_record("t[a]", 0.004)], waivers=waivers).passed


def test_expired_waiver_fails_the_gate_and_waives_nothing():
    waivers = {"t*": Waiver("old issue", dt.date(2026, 5, 31))}
    result = gate([make_record("t[a]", 0.004)], waivers=waivers)
    assert rules(result) == [("expired waiver", "t*"), ("fails tolerance", "t[a]")]
    assert "expired on 2026-05-31" in result.blocking.set_index("rule").at["expired waiver", "detail"]


def test_expired_waiver_fails_even_when_its_cases_pass():
    waivers = {"t*": Waiver("old issue", dt.date(2026, 5, 31))}
    assert rules(gate([make_record("t[a]", 0.001)], waivers=waivers)) == [("expired waiver", "t*")]


def test_empty_run_fails_the_gate_with_a_message():
    result = gate([], [make_record("t[a]", 0.001)])
    assert not result.passed
    assert result.blocking["rule"].tolist() == ["empty run"]
    assert "nothing was verified" in result.blocking["detail"].iloc[0]


def test_the_why_names_the_records_error_or_reason():
    result = gate([make_record("t[a]", float("nan"), passed=False, error="RuntimeError: shape mismatch"),
                   make_record("t[b]", 0.001, passed=False, reason="2 NaN positions differ")])
    assert result.blocking["detail"].tolist() == ["RuntimeError: shape mismatch", "2 NaN positions differ"]


def test_a_case_with_several_records_fails_if_any_fails():
    result = gate([make_record("t[a]", 0.001), make_record("t[a]", 0.005, reason="output 1: 0.005 > 0.003")])
    assert rules(result) == [("fails tolerance", "t[a]")]
    assert result.blocking["detail"].tolist() == ["output 1: 0.005 > 0.003"]


def test_a_waived_case_that_worsens_tenfold_fails_the_gate_whatever_waives_it():
    base = [make_record("t[int8]", 0.032, bound=0.02, waived=True)]
    run = [make_record("t[int8]", 0.32, bound=0.02, waived=True)]  # 10 x the baseline > 1.5
    result = gate(run, base, waivers={"t[*": Waiver("int8 on random weights", dt.date(2026, 12, 31))})
    assert rules(result) == [("waived but worsened", "t[int8]")]
    assert result.blocking["detail"].iloc[0] == "0.32 > 1.5 x baseline 0.032"
    # the same deviation, not grown, stays waived
    assert gate(base, base).passed


@pytest.mark.parametrize("status", ["not_on_device", "not_fused", "nondeterministic"])
def test_provenance_statuses_fail_the_gate_unless_allowed(status):
    run = [make_record("t[a]", 0.001, status=status), make_record("t[b]", 0.001)]
    assert rules(gate(run)) == [(status, "t[a]")]
    assert gate(run, allow=[status]).passed
    # a baseline case that was ok and is now not on the device is a new failure
    assert rules(gate(run, [make_record("t[a]", 0.001), make_record("t[b]", 0.001)])) == [("new failure", "t[a]")]


def test_only_selected_baseline_cases_can_be_missing():
    base = [make_record("t[a]", 0.001), make_record("t[deselected]", 0.001), make_record("t[gone]", 0.001)]
    result = gate([make_record("t[a]", 0.001)], base, selected={"t[a]", "t[gone]"})
    assert rules(result) == [("missing", "t[gone]")]
