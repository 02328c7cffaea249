"""The page skeleton, number format, verdict texts and CI summary (no browser needed)."""
import json
import math
import re

import pytest

from mluverify.plugins.report_writers import mluverify_report
from mluverify.report.diff import diff_runs
from mluverify.report.gate import evaluate_gate
from mluverify.report.pages import audit_documents, ci_summary, diff_documents, verdict, verdict_line
from mluverify.report.render import format_number
from mluverify.report.tables import error_points, run_tables, totals

from report_records import as_frame, make_record


@pytest.mark.parametrize("value, text", [
    (0.00041839, "4.18e-4"), (0.003, "3e-3"), (1e-9, "1e-9"), (0.0213, "0.0213"), (0.02, "0.02"),
    (2.0, "2"), (63.456, "63.5"), (12345.0, "1.23e4"), (-0.004, "-4e-3"), (0.0, "0"),
    (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, ""),
    (0.99999993, "0.99999993"),  # three digits would claim 1
    (111.207468, "111"), (99.99, "99.99"), (2.9999, "2.9999"),  # 100 and 3 would be other whole numbers
])
def test_numbers_are_compact_scientific(value, text):
    assert format_number(value) == text


ROWS = [
    make_record("t[ok]", 0.001),
    make_record("t[bad]", 0.006, reason="rel_mse 0.006 > bound 0.003"),
    make_record("t[boom]", math.nan, passed=False, error="RuntimeError: boom"),
    make_record("t[cpu]", 0.001, status="not_on_device", fallback_ops="aten::add.Tensor"),
]


@pytest.fixture
def frame():
    return as_frame(ROWS)


def test_verdict_is_the_gates_when_gated_else_the_failures(frame):
    assert verdict(totals(frame), None) == ("2 of 4 comparisons failed or errored; 1 not verified on the device", "bad")
    gate = evaluate_gate(frame)
    assert not gate.passed and verdict(totals(frame), gate)[0].startswith("gate FAILED")
    only_cpu = as_frame([ROWS[0], ROWS[3]])
    assert verdict(totals(only_cpu), None) == ("no failures, but 1 not verified on the device", "warn")
    waived = as_frame([ROWS[0], make_record("t[w]", 0.005, waived=True)])
    assert verdict(totals(waived), None) == ("all comparisons passed or waived", "good")
    assert verdict(totals(as_frame([ROWS[0]])), None) == ("all comparisons passed", "good")
    assert verdict(totals(as_frame([])), None) == ("no records: nothing was verified", "bad")


def test_the_run_ends_with_one_line(frame):
    line = verdict_line(totals(frame), None, "reports/latest/report.html")
    assert line == ("mluverify: 2 of 4 comparisons failed or errored; 1 not verified on the device; "
                    "4 comparisons in 4 cases: 1 errored, "
                    "1 not_on_device, 1 failed, 1 passed; report: reports/latest/report.html")
    assert "\n" not in line


def test_ci_summary_has_the_verdict_and_the_failures_table(frame):
    summary = ci_summary(run_tables(frame), None, None, "out/report.html")
    lines = summary.splitlines()
    assert lines[0] == "### mluverify: 2 of 4 comparisons failed or errored; 1 not verified on the device"
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| status | case_id | target | value | bound | reason | error |"
    assert table[1].startswith("| errored | t[boom] |") and table[2].startswith("| failed | t[bad] | mlu:cnnl | 6e-3 | 3e-3 |")
    assert len(table) == 3 and lines[-1] == "Full report: `out/report.html`"


def test_the_writer_appends_to_the_ci_job_summary(frame, tmp_path, monkeypatch):
    summary_file = tmp_path / "step_summary.md"
    summary_file.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    mluverify_report(frame, tmp_path / "run")
    text = summary_file.read_text()
    assert text.startswith("earlier step\n### mluverify: 2 of 4 comparisons failed or errored; 1 not verified")
    assert f"Full report: `{tmp_path / 'run' / 'report.html'}`" in text


def test_no_ci_summary_without_the_variable(frame, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    mluverify_report(frame, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "summary.csv", "summary.md"]


def test_the_report_links_the_pages_the_suites_wrote_beside_it(frame, tmp_path):
    mluverify_report(frame, tmp_path)
    assert "fuzz.html" not in (tmp_path / "report.html").read_text()
    (tmp_path / "fuzz.html").write_text("<html></html>")  # what suites/fuzz writes into the run
    mluverify_report(frame, tmp_path)
    assert '<li><a href="fuzz.html">fuzz findings</a></li>' in (tmp_path / "report.html").read_text()
    assert "- [fuzz findings](fuzz.html)" in (tmp_path / "summary.md").read_text()


def table_payload(page, table_id):
    found = re.search(rf'<div class="mv-table" id="{table_id}"><script type="application/json" class="mv-data">(.*?)</script>',
                      page, re.S)
    return json.loads(found.group(1))


def test_report_page_is_self_contained_and_carries_every_record(frame, tmp_path):
    # text that would end or hide the data's script element if it were written as is
    frame.loc[frame["case_id"] == "t[bad]", "reason"] = "x </script><script>alert(1)</script> <!-- y"
    mluverify_report(frame, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "http://" not in page and "https://" not in page and "<link" not in page and " src=\"http" not in page
    assert page.count('src="data:image/png;base64,') == 2
    cases = table_payload(page, "cases")
    status, case_id = cases["columns"].index("status"), cases["columns"].index("case_id")
    assert [(row[status], row[case_id]) for row in cases["rows"]] == [
        ("errored", "t[boom]"), ("not_on_device", "t[cpu]"), ("failed", "t[bad]"), ("passed", "t[ok]")]
    assert cases["rows"][2][cases["columns"].index("reason")] == "x </script><script>alert(1)</script> <!-- y"
    assert "alert" not in page.replace("\\u003cscript>alert(1)", "")


def test_diff_and_audit_pages_share_the_report_skeleton(frame, tmp_path):
    from mluverify.report.audit import audit_runs

    mluverify_report(frame, tmp_path)
    report = (tmp_path / "report.html").read_text()
    style = re.search(r"<style>(.*?)</style>", report, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", report, re.S).group(1)
    base = as_frame([dict(r, value=0.001, passed=True, status="passed", error="") for r in ROWS])
    _, diff_page = diff_documents(diff_runs(base, frame), "base", "new")
    _, audit_page = audit_documents(audit_runs([frame]), error_points(frame), ["new"])
    for page in (diff_page, audit_page):
        assert f"<style>{style}</style>" in page and f"<script>{script}</script>" in page
        assert '<div class="mv-banner' in page and 'class="mv-table"' in page
    # the diff lists what changed, failures first; the audit colours groups by verdict
    diff_cases = table_payload(diff_page, "diff-cases")
    assert [row[0] for row in diff_cases["rows"]][:1] == ["new failure"]
    assert table_payload(audit_page, "audit-groups")["tone"] == table_payload(audit_page, "audit-groups")["columns"].index("verdict")


def test_a_diff_page_lists_the_most_severe_changes_first_up_to_its_cap(monkeypatch):
    from mluverify.report import pages

    base = as_frame([make_record(f"t[{i}]", 0.001) for i in range(4)])
    new = as_frame([make_record("t[0]", 0.0001), make_record("t[1]", 0.006), make_record("t[2]", 0.001),
                    make_record("t[3]", 0.0025)])   # improved, new failure, unchanged, worsened (2.5x)
    monkeypatch.setattr(pages, "MAX_DIFF_ROWS", 2)
    _, page = diff_documents(diff_runs(base, new), "base", "new")
    rows = table_payload(page, "diff-cases")["rows"]
    assert [(row[0], row[1]) for row in rows] == [("new failure", "t[1]"), ("worsened", "t[3]")]
    assert "The first 2 of the 3 cases that changed, most severe first; the 1 unchanged cases are only counted." in page


def test_audit_prints_a_summary_and_the_page_not_its_markdown(tmp_path, capsys):
    from mluverify.cli import main

    from report_records import write_run

    run = write_run(tmp_path / "run", [make_record("t[a]", 0.001), make_record("t[b]", 0.0029)])
    assert main(["audit", str(run), "--out", str(tmp_path / "audit")]) == 0
    printed = capsys.readouterr().out.splitlines()
    # one group: largest passing value 0.0029 under the 0.003 bound, headroom 1.03 < 1.2
    assert printed == ["mluverify audit: 1 groups: 1 too tight",
                       f"full page: {tmp_path / 'audit' / 'audit.html'} (also {tmp_path / 'audit' / 'audit.csv'}, "
                       f"{tmp_path / 'audit' / 'audit.md'})"]


def test_a_failed_cases_detail_view_lists_its_worst_elements(frame, tmp_path):
    worst = "(3,): 1.5 vs 1; (0,): 0.25 vs 0"  # what the record holds (``Record.worst``)
    frame.loc[frame["case_id"] == "t[bad]", "worst"] = worst
    mluverify_report(frame, tmp_path)
    cases = table_payload((tmp_path / "report.html").read_text(), "cases")
    column = cases["columns"].index("worst")
    sections = {heading: columns for heading, columns in cases["detail"]}
    assert sections["Worst elements (index: actual vs expected)"] == [column]
    [row] = [row for row in cases["rows"] if row[cases["columns"].index("case_id")] == "t[bad]"]
    assert row[column] == worst
