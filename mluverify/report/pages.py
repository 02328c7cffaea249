"""The documents of a run report, a regression diff and a tolerance audit, in markdown and HTML.

Each takes tables already computed (``tables``, ``diff``, ``audit``) and lays them out with the
shared renderers of ``render``; nothing here computes a number.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from mluverify.report import plots
from mluverify.report.render import html_image, html_page, html_paragraph, html_table, markdown_page, markdown_table

if TYPE_CHECKING:
    import pandas as pd

    from mluverify.report.audit import Audit
    from mluverify.report.diff import RunDiff
    from mluverify.report.tables import RunTables

# Long case lists are cut in the documents (the CSV / parquet keep everything).
MAX_LISTED = 200
EMPTY_RUN = "This run holds no records: nothing was verified."
# A section body is a table, or a sentence.
Body = "pd.DataFrame | str"


def _listed(heading: str, frame: "pd.DataFrame") -> tuple[str, Body]:
    """A section listing the rows of ``frame``, cut at ``MAX_LISTED`` (the heading says so)."""
    if frame.empty:
        return heading, "None."
    if len(frame) > MAX_LISTED:
        return f"{heading} (first {MAX_LISTED} of {len(frame)})", frame.head(MAX_LISTED)
    return heading, frame


def report_documents(tables: "RunTables", title: str) -> tuple[str, str]:
    """``(summary.md, report.html)`` of one run."""
    if tables.totals.at[0, "records"] == 0:
        return _render(title, [("Totals", tables.totals), ("Summary", EMPTY_RUN)], [])
    sections = [
        ("Totals", tables.totals),
        ("Summary per op x target x dtype", tables.summary),
        ("Worst cases", tables.worst),
    ]
    figures = [*_error_figure(tables.ratios),
               ("Pass rate per op x target", "pass-heatmap", lambda: plots.pass_heatmap_png(tables.matrix))]
    return _render(title, sections, figures)


def _error_figure(ratios: "pd.DataFrame") -> list[tuple[str, str, Callable[[], bytes]]]:
    """The error-distribution figure, when some comparison has a ratio to its bound."""
    if ratios.empty:
        return []
    return [("Error distribution per op against its bound", "error-distribution",
             lambda: plots.error_distribution_png(ratios))]


def _render(title: str, sections: list[tuple[str, Body]],
            figures: list[tuple[str, str, Callable[[], bytes]]]) -> tuple[str, str]:
    """``(markdown, html)``: markdown of ``sections``; HTML of ``figures`` (heading, element id,
    PNG maker) then ``sections``."""
    def body(content: Body, table: Callable[["pd.DataFrame"], str], text: Callable[[str], str]) -> str:
        return text(content) if isinstance(content, str) else table(content)

    markdown = markdown_page(title, [(h, body(c, markdown_table, lambda t: t + "\n")) for h, c in sections])
    images = [(heading, html_image(make(), heading, image_id)) for heading, image_id, make in figures]
    html_sections = [(h, body(c, html_table, html_paragraph)) for h, c in sections]
    return markdown, html_page(title, images + html_sections)


def diff_documents(diff: "RunDiff", base_name: str, new_name: str) -> tuple[str, str]:
    """``(diff.md, diff.html)`` of a regression diff."""
    import pandas as pd

    counts = pd.DataFrame([diff.counts()])
    columns = ["case_id", "target", "op", "dtype", "metric", "value_base", "value_new", "ratio"]
    lists = [
        _listed(status.capitalize() + " cases", diff.cases.loc[diff.cases["status"] == status, columns])
        for status in ("new failure", "worsened", "missing", "fixed", "improved")
    ]
    verdict = "Regressed: new failures, worsened or missing cases." if diff.regressed else "No regression."
    sections = [("Verdict", verdict), ("Cases per status", counts), *lists,
                ("Per-op deltas of the judged metric", diff.groups)]
    return _render(f"mluverify diff: {base_name} -> {new_name}", sections, [])


def audit_documents(audit: "Audit", ratios: "pd.DataFrame", runs: list[str]) -> tuple[str, str]:
    """``(audit.md, audit.html)`` of a tolerance audit over ``runs``."""
    from mluverify.report import audit as rules

    legend = (f"Verdict: too tight when a case failed or headroom < {rules.TIGHT_HEADROOM:g}; too loose "
              f"when headroom > {rules.LOOSE_HEADROOM:g}. Recommended bound: max observed x safety "
              f"factor, rounded up to {rules.SIGNIFICANT_DIGITS} significant digits.")
    sections = [("Runs", ", ".join(runs)), ("Bounds per op x target x dtype", audit.groups),
                ("How to read it", legend), ("Worst inputs", audit.worst)]
    return _render("mluverify tolerance audit", sections, _error_figure(ratios))


def gate_table(findings: "pd.DataFrame", limit: int | None = None) -> str:
    """The why-table of the gate as markdown, its first ``limit`` rows (all when None)."""
    shown = findings if limit is None else findings.head(limit)
    table = markdown_table(shown.drop(columns=["baseline_value"]))
    if len(shown) < len(findings):
        table += f"... and {len(findings) - len(shown)} more findings\n"
    return table
