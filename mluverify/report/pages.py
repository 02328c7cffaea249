"""The documents of a run report, a regression diff and a tolerance audit, in markdown and HTML,
and the short texts a terminal or a CI job summary shows.

Each takes tables already computed (``tables``, ``diff``, ``audit``, ``gate``) and lays them out
with the shared renderers of ``render``; nothing here computes a number.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from mluverify.report import plots
from mluverify.report.render import (
    Chip, TableSpec, html_banner, html_facts, html_image, html_page, html_paragraph, html_table,
    markdown_page, markdown_table,
)
from mluverify.report.completeness import RunCompleteness
from mluverify.report.parity import parity_sections
from mluverify.report.tables import FAILING, STATUSES

if TYPE_CHECKING:
    import pandas as pd

    from mluverify.report.audit import Audit
    from mluverify.report.diff import RunDiff
    from mluverify.report.gate import GateResult
    from mluverify.report.tables import RunTables

# Long case lists are cut in the markdown documents (the HTML, CSV and parquet keep everything).
MAX_LISTED = 200
# Changed cases a diff page lists (most severe first): a page stays a few MB at any scale.
MAX_DIFF_ROWS = 10_000
# Rows of the failures table in a CI job summary.
CI_FAILURES = 30
EMPTY_RUN = "This run holds no records: nothing was verified."
CASES_TABLE = "cases"
CASE_SPEC = TableSpec(
    shown=("status", "case_id", "op", "target", "dtype", "shape", "metric", "value", "bound", "headroom",
           "executed_as", "fallback_ops", "reason"),
    long={"case_id": 22, "fallback_ops": 10, "reason": 18},
    tone="status", order=STATUSES, code=("reproducer",), links=("dump", "dump_diff"),
    detail=(
        ("Judgement", ("status", "metric", "value", "bound", "headroom", "reason", "error", "kind", "leaf",
                       "tolerance_metric", "tolerance_bound", "tolerance_source")),
        ("Worst elements (index: actual vs expected)", ("worst",)),
        ("Waiver", ("waiver_reason", "waiver_until")),
        ("Metrics", ("rel_mse", "raw_rel_mse", "eps_zeroed", "rae", "rma", "max_abs", "max_rel", "cosine",
                     "sqnr_db", "ulp_max", "ulp_p99", "nan_mismatch",
                     "extra_metrics", "device_error", "reference_error", "error_ratio")),
        ("Fallback ops (ran on the CPU)", ("fallback_ops", "op_on_cpu")),
        ("Provenance", ("op", "target", "backend", "mode", "dtype", "quant", "shape", "executed_as",
                        "not_fused_reason", "device_impl", "core_version", "core_number", "compile_s",
                        "graph_breaks", "recompiles", "duration_s", "seed", "model", "call_site", "suite",
                        "run_id")),
        ("Reproducer", ("reproducer",)),
        ("Dump", ("dump", "dump_diff")),
    ),
)
SUMMARY_SPEC = TableSpec(tone="worst", order=STATUSES, page=200)
FINDINGS_SPEC = TableSpec(long={"case_id": 24, "detail": 30, "waiver": 20}, tone="rule", page=20)


def verdict(totals: "pd.DataFrame", gate: "GateResult | None",
            completeness: RunCompleteness = RunCompleteness(True)) -> tuple[str, str]:
    """The run's verdict and its tone: an incomplete run says so first and is never green
    (amber at best); then the gate's verdict when it was applied, else what failed or was not
    verified on the device."""
    text, tone = _records_verdict(totals, gate)
    if completeness.complete:
        return text, tone
    if tone == "good":  # what passed is only what ran: no claim that the run passed
        text = "no recorded comparison failed" if gate is None else text
    return f"{completeness.headline}; {text}", "bad" if tone == "bad" else "warn"


def _records_verdict(totals: "pd.DataFrame", gate: "GateResult | None") -> tuple[str, str]:
    from mluverify.core.status import PROVENANCE_STATUSES

    counts = totals.iloc[0]
    if gate is not None:
        return ("gate passed", "good") if gate.passed else (f"gate FAILED: {len(gate.blocking)} blocking findings", "bad")
    if counts["records"] == 0:
        return "no records: nothing was verified", "bad"
    failing = sum(int(counts[s]) for s in FAILING)
    unverified = sum(int(counts[s]) for s in PROVENANCE_STATUSES)
    unverified_text = f"{unverified} not verified on the device" if unverified else ""
    if failing:
        return "; ".join(filter(None, [f"{failing} of {counts['records']} comparisons failed or errored",
                                       unverified_text])), "bad"
    if unverified:
        return f"no failures, but {unverified_text}", "warn"
    return ("all comparisons passed" if counts["passed"] == counts["records"] else "all comparisons passed or waived"), "good"


def counts_text(totals: "pd.DataFrame") -> str:
    """``120 comparisons: 115 passed, 3 failed, ...`` (statuses with a count only)."""
    counts = totals.iloc[0]
    listed = ", ".join(f"{int(counts[s])} {s}" for s in STATUSES if counts[s])
    return f"{counts['records']} comparisons in {counts['cases']} cases" + (f": {listed}" if listed else "")


def diff_text(diff: "RunDiff") -> str:
    """The baseline comparison in a line: every status with a count."""
    counts = diff.counts()
    return "since the baseline: " + (", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no cases")


def verdict_line(totals: "pd.DataFrame", gate: "GateResult | None", report: str,
                 completeness: RunCompleteness = RunCompleteness(True)) -> str:
    """The one line printed at the end of every run: verdict, counts, the report's path."""
    text, _ = verdict(totals, gate, completeness)
    return f"mluverify: {text}; {counts_text(totals)}; report: {report}"


def report_documents(tables: "RunTables", title: str, gate: "GateResult | None" = None,
                     diff: "RunDiff | None" = None, baseline: str = "",
                     pages: Sequence[tuple[str, str]] = ()) -> tuple[str, str]:
    """``(summary.md, report.html)`` of one run; ``gate`` and ``diff`` (against ``baseline``)
    when they were made; ``pages``: (title, path relative to the report) of the other pages the
    run wrote (the fuzz page), linked from both."""
    text, tone = verdict(tables.totals, gate, tables.completeness)
    lines = [counts_text(tables.totals)] + ([diff_text(diff)] if diff is not None else [])
    lines += [f"{len(tables.corrupt)} shard line(s) held no record and were skipped: {'; '.join(tables.corrupt)}"
              ] if tables.corrupt else []
    chips = [Chip(s, int(tables.totals.at[0, s]), CASES_TABLE) for s in STATUSES]
    findings = [] if gate is None or gate.findings.empty else [("Gate findings", gate.findings)]
    markdown = markdown_page(title, [
        ("Verdict", "\n\n".join([text, *lines]) + "\n"),
        ("Totals", markdown_table(tables.totals)),
        *([("Pages", "".join(f"- [{name}]({path})\n" for name, path in pages))] if pages else []),
        *[(h, markdown_table(f)) for h, f in findings],
        ("Summary per op x target x dtype", markdown_table(tables.summary) if len(tables.summary) else EMPTY_RUN + "\n"),
        ("Worst cases", markdown_table(tables.worst) if len(tables.worst) else "None.\n"),
        _listed("Waived cases", tables.waivers),
        *_task_section(tables),
    ])
    sections = [("Run", html_facts(tables.overview.itertuples(index=False)))]
    sections += [("Pages", _html_links(pages))] if pages else []
    sections += _report_figures(tables, diff, baseline)
    sections += [(h, html_table(f, "findings", FINDINGS_SPEC)) for h, f in findings]
    sections += [
        ("Summary per op x target x dtype", html_table(tables.summary, "summary", SUMMARY_SPEC)),
        ("Cases", html_paragraph("Click a row for its metrics, provenance, reproducer and dump.")
         + html_table(tables.cases, CASES_TABLE, CASE_SPEC)),
    ]
    sections += parity_sections(tables.cases)
    sections += [(heading, html_table(tables.tasks, "tasks")) for heading, _ in _task_section(tables)]
    return markdown, html_page(title, html_banner(text, tone, chips, lines), sections)


def _task_section(tables: "RunTables") -> list[tuple[str, str]]:
    """The task metrics' section (``tables.task_cases``), none when no case declared one."""
    if tables.tasks is None or tables.tasks.empty:
        return []
    return [("Task metrics (value, reference, threshold, samples, error budget)", markdown_table(tables.tasks))]


def _html_links(pages: Sequence[tuple[str, str]]) -> str:
    import html

    items = "".join(f'<li><a href="{html.escape(path)}">{html.escape(name)}</a></li>' for name, path in pages)
    return f"<ul>{items}</ul>"


def _report_figures(tables: "RunTables", diff: "RunDiff | None", baseline: str) -> list[tuple[str, str]]:
    if tables.points.empty:
        return [("Plots", html_paragraph(EMPTY_RUN))]
    figures = [html_image(plots.error_vs_bound_png(tables.points), "judged metric / bound", "error-vs-bound"),
               html_image(plots.pass_heatmap_png(tables.matrix), "pass rate", "pass-heatmap")]
    if diff is not None and not diff.groups.empty:
        figures.append(html_image(plots.change_png(diff.groups, baseline), "change since the baseline", "change"))
    return [("Plots", "".join(figures))]


def diff_documents(diff: "RunDiff", base_name: str, new_name: str) -> tuple[str, str]:
    """``(diff.md, diff.html)`` of a regression diff."""
    import pandas as pd

    from mluverify.report.diff import STATUSES as DIFF_STATUSES

    counts = diff.counts()
    text = "Regressed: new failures, worsened or missing cases." if diff.regressed else "No regression."
    columns = ["status", "case_id", "target", "op", "dtype", "metric", "value_base", "value_new", "ratio"]
    lists = [_listed(status.capitalize() + " cases", diff.cases.loc[diff.cases["status"] == status, columns])
             for status in ("new failure", "worsened", "missing", "fixed", "improved")]
    title = f"mluverify diff: {base_name} -> {new_name}"
    markdown = markdown_page(title, [("Verdict", text + "\n"), ("Cases per status", markdown_table(pd.DataFrame([counts]))),
                                     *lists, ("Per-op deltas of the judged metric", markdown_table(diff.groups))])
    changed = diff.cases[diff.cases["status"] != "unchanged"]
    changed = changed.assign(_rank=changed["status"].map(DIFF_STATUSES.index)).sort_values("_rank", kind="stable")
    listed = (f"Every case that changed ({len(changed)})" if len(changed) <= MAX_DIFF_ROWS else
              f"The first {MAX_DIFF_ROWS} of the {len(changed)} cases that changed, most severe first")
    spec = TableSpec(shown=columns, tone="status", order=DIFF_STATUSES, long={"case_id": 30})
    sections = [
        ("Cases", html_paragraph(f"{listed}; the {counts['unchanged']} unchanged cases are only counted.")
         + html_table(changed.head(MAX_DIFF_ROWS)[columns + ["bound_new", "reason_new", "error_new"]],
                      "diff-cases", spec)),
        ("Per-op deltas of the judged metric", html_table(diff.groups, "diff-groups")),
    ]
    if not diff.groups.empty:
        sections.insert(0, ("Plots", html_image(plots.change_png(diff.groups, base_name), "change", "change")))
    chips = [Chip(status, n, "diff-cases" if status != "unchanged" else "") for status, n in counts.items()]
    banner = html_banner(text, "bad" if diff.regressed else "good", chips, [f"baseline: {base_name}; new: {new_name}"])
    return markdown, html_page(title, banner, sections)


def _listed(heading: str, frame: "pd.DataFrame") -> tuple[str, str]:
    """A markdown section listing the rows of ``frame``, cut at ``MAX_LISTED`` (the heading says so)."""
    if frame.empty:
        return heading, "None.\n"
    if len(frame) > MAX_LISTED:
        return f"{heading} (first {MAX_LISTED} of {len(frame)})", markdown_table(frame.head(MAX_LISTED))
    return heading, markdown_table(frame)


def audit_documents(audit: "Audit", points: "pd.DataFrame", runs: Sequence[str]) -> tuple[str, str]:
    """``(audit.md, audit.html)`` of a tolerance audit over ``runs``."""
    from mluverify.report.audit import LEGEND, VERDICTS

    text = audit_summary(audit)
    markdown = markdown_page("mluverify tolerance audit", [
        ("Verdict", text + "\n"), ("Runs", ", ".join(runs) + "\n"),
        ("Bounds per op x target x dtype", markdown_table(audit.groups)), ("How to read it", LEGEND + "\n"),
        ("Worst inputs", markdown_table(audit.worst))])
    verdicts = audit.groups["verdict"].value_counts()
    chips = [Chip(v, int(verdicts.get(v, 0)), "audit-groups") for v in VERDICTS]
    tone = "bad" if verdicts.get("failing", 0) or verdicts.get("too tight", 0) else "warn" if verdicts.get("too loose", 0) else "good"
    sections = [
        ("Runs", html_facts([(f"run {i + 1}", run) for i, run in enumerate(runs)])),
        ("Bounds per op x target x dtype", html_paragraph(LEGEND) + html_table(
            audit.groups, "audit-groups", TableSpec(tone="verdict", order=VERDICTS, long={"admits": 20}))),
        ("Worst inputs", html_table(audit.worst, "audit-worst", TableSpec(long={"case_id": 24, "reproducer": 24}))),
    ]
    if not points.empty:
        sections.insert(1, ("Plots", html_image(plots.error_vs_bound_png(points), "judged metric / bound", "error-vs-bound")))
    return markdown, html_page("mluverify tolerance audit", html_banner(text, tone, chips), sections)


def audit_summary(audit: "Audit") -> str:
    """``12 groups: 2 too tight, 1 too loose, 9 ok`` (verdicts with a count only)."""
    from mluverify.report.audit import VERDICTS

    verdicts = audit.groups["verdict"].value_counts()
    listed = ", ".join(f"{int(verdicts[v])} {v}" for v in VERDICTS if verdicts.get(v, 0))
    return f"{len(audit.groups)} groups" + (f": {listed}" if listed else "")


def gate_table(findings: "pd.DataFrame", limit: int | None = None) -> str:
    """The why-table of the gate as markdown, its first ``limit`` rows (all when None)."""
    shown = findings if limit is None else findings.head(limit)
    table = markdown_table(shown.drop(columns=["baseline_value"]))
    if len(shown) < len(findings):
        table += f"... and {len(findings) - len(shown)} more findings\n"
    return table


def ci_summary(tables: "RunTables", gate: "GateResult | None", diff: "RunDiff | None", report: str) -> str:
    """Markdown for a CI job summary: verdict, counts, the failures table, the report's path."""
    text, _ = verdict(tables.totals, gate, tables.completeness)
    failing = tables.cases[tables.cases["status"].isin(FAILING)]
    columns = ["status", "case_id", "target", "value", "bound", "reason", "error"]
    parts = [f"### mluverify: {text}", "", counts_text(tables.totals)]
    if diff is not None:
        parts.append(diff_text(diff))
    if gate is not None and not gate.blocking.empty:
        parts += ["", "#### Gate findings", "", gate_table(gate.blocking, CI_FAILURES)]
    if not failing.empty:
        parts += ["", "#### Failures", "", markdown_table(failing[columns].head(CI_FAILURES))]
    parts += ["", f"Full report: `{report}`", ""]
    return "\n".join(parts)

