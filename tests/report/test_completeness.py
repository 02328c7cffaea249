"""An incomplete run reads as incomplete everywhere and passes nothing: run.json's completeness,
the verdict and its tone, the gate. Each expectation follows from the records written here
(three passing records of two tests; the run collected six tests)."""
from mluverify.report.completeness import (INTERRUPTED, KILLED, RunCompleteness, at_claim, at_end,
                                           completeness_of, merged)
from mluverify.report.gate import evaluate_gate
from mluverify.report.pages import verdict, verdict_line
from mluverify.report.tables import run_tables, totals

from report_records import as_frame, make_record

ROWS = [make_record("t.py::test_a[x]", 0.001), make_record("t.py::test_a[x]#2", 0.001),
        make_record("t.py::test_b[x]", 0.002)]


def test_a_claimed_run_is_incomplete_until_its_end_is_recorded():
    claimed = at_claim(6).as_metadata()
    assert claimed == {"complete": False, "tests_collected": 6, "incomplete_reason": KILLED}
    killed = completeness_of(claimed, as_frame(ROWS))
    assert (killed.complete, killed.tests_run, killed.tests_collected) == (False, 2, 6)  # test_a twice, test_b
    assert killed.headline == f"incomplete: 2 of 6 tests ({KILLED})"


def test_how_a_run_ends():
    assert at_end(6, 6, interrupted=False) == RunCompleteness(True, "", 6, 6)
    assert at_end(2, 6, interrupted=True).headline == f"incomplete: 2 of 6 tests ({INTERRUPTED})"
    assert at_end(2, 6, interrupted=False).headline.startswith("incomplete: 2 of 6 tests (stopped early")


def test_runs_from_before_completeness_existed():
    assert completeness_of({"run_id": "r", "finished": "2026-01-01T00:00:00"}).complete
    assert not completeness_of({"run_id": "r", "interrupted": True}).complete


def test_merged_runs_are_complete_only_if_each_was():
    assert merged([RunCompleteness(True), RunCompleteness(True)]).complete
    both = merged([RunCompleteness(True), at_end(1, 4, interrupted=True)])
    assert not both.complete
    assert both.headline == f"incomplete: (1 of 2 merged runs incomplete, the first: 1 of 4 tests ({INTERRUPTED}))"


def test_a_completeness_replaces_the_one_stated_before():
    claimed = {"run_id": "r", **at_claim(6).as_metadata()}
    assert at_end(6, 6, interrupted=False).stated_in(claimed) == {
        "run_id": "r", "complete": True, "tests_collected": 6, "tests_run": 6}
    assert at_end(2, 6, interrupted=True).stated_in(claimed)["incomplete_reason"] == INTERRUPTED


def test_an_incomplete_run_with_only_passes_is_amber_and_claims_no_pass():
    frame = as_frame(ROWS)
    incomplete = completeness_of(at_claim(6).as_metadata(), frame)
    assert verdict(totals(frame), None) == ("all comparisons passed", "good")
    text, tone = verdict(totals(frame), None, incomplete)
    assert tone == "warn" and text == f"incomplete: 2 of 6 tests ({KILLED}); no recorded comparison failed"
    line = verdict_line(totals(frame), None, "r/report.html", incomplete)
    assert line.startswith("mluverify: incomplete: 2 of 6 tests") and "all comparisons passed" not in line
    assert run_tables(frame, at_claim(6).as_metadata()).completeness == incomplete


def test_an_incomplete_run_with_a_failure_stays_red():
    frame = as_frame(ROWS + [make_record("t.py::test_c[x]", 0.01)])
    text, tone = verdict(totals(frame), None, at_end(3, 6, interrupted=True))
    assert tone == "bad" and text.startswith("incomplete: 3 of 6 tests") and "1 of 4 comparisons failed" in text


def test_the_gate_fails_an_incomplete_run_naming_why():
    frame = as_frame(ROWS)
    assert evaluate_gate(frame).passed
    gate = evaluate_gate(frame, incomplete="incomplete: 2 of 6 tests (interrupted)")
    assert not gate.passed
    [finding] = gate.blocking.itertuples()
    assert finding.rule == "incomplete run" and finding.detail.startswith("incomplete: 2 of 6 tests (interrupted)")
