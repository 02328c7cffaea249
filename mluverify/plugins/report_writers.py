"""Built-in report outputs of a run: ``summary.csv``, ``summary.md`` (for CI logs), a
self-contained interactive ``report.html`` (linking the pages the run's suites wrote beside it:
``fuzz.html``), a dump-diff page in each failing case's dump (``--mlu-dump=fail``), and the
verdict with the failures table appended to the CI job summary when the CI provides one
(``$GITHUB_STEP_SUMMARY``)."""
from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from mluverify.core.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd

    from mluverify.report.diff import RunDiff
    from mluverify.report.gate import GateResult

# The file a GitHub Actions step appends markdown to for its job summary.
CI_SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"


@hookimpl
def mluverify_report(frame: "pd.DataFrame", outdir: Path, gate: "GateResult | None" = None,
                     diff: "RunDiff | None" = None) -> None:
    from mluverify.report.pages import ci_summary, report_documents
    from mluverify.report.records import read_metadata
    from mluverify.report.finish import write_files
    from mluverify.report.tables import run_tables

    outdir = Path(outdir)
    metadata = read_metadata(outdir)
    tables = run_tables(frame, metadata)
    tables = replace(tables, cases=link_dumps(tables.cases, outdir))
    run_id = metadata.get("run_id") or ", ".join(sorted(frame["run_id"].dropna().astype(str).unique())) or "(no run id)"
    markdown, page = report_documents(tables, f"mluverify report: run {run_id}", gate, diff,
                                      metadata.get("baseline", "the baseline"), run_pages(outdir))
    write_files(outdir, {
        "summary.csv": tables.summary.to_csv(index=False),
        "summary.md": markdown,
        "report.html": page,
    })
    summary_file = os.environ.get(CI_SUMMARY_VARIABLE)
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as out:
            out.write(ci_summary(tables, gate, diff, str(outdir / "report.html")))


def run_pages(outdir: Path) -> list[tuple[str, str]]:
    """(title, file) of the pages beside the report that the run's suites wrote into the run
    directory: the fuzz page of the kept findings, where ``suites/fuzz`` ran."""
    from mluverify.report.fuzz_page import FUZZ_PAGE

    return [("fuzz findings", FUZZ_PAGE)] if (Path(outdir) / FUZZ_PAGE).is_file() else []


def link_dumps(cases: "pd.DataFrame", outdir: Path) -> "pd.DataFrame":
    """``cases`` with ``dump`` kept only where that directory exists under ``outdir``, and
    ``dump_diff`` pointing at the dump-diff page written into each (judging each dumped op by
    the case's own resolved tolerance, the case's own output error beside them)."""
    cases = cases.assign(dump=cases["dump"].where([bool(d) and (outdir / d).is_dir() for d in cases["dump"]], ""))
    if not cases["dump"].any():
        return cases  # without dumps, not even the dump package (it loads torch) is imported
    from mluverify.dump import dump_diff
    from mluverify.errors import MluverifyError
    from mluverify.report.dump_diff import recorded_case_error, write_dump_diff_pages

    pages = {}
    for row in cases[cases["dump"] != ""].drop_duplicates("dump").to_dict("records"):
        try:
            diff = dump_diff(outdir / row["dump"], case=recorded_case_error(row))
            write_dump_diff_pages(diff, outdir / row["dump"])
        except MluverifyError as exc:  # a damaged dump must not cost the run its report
            warnings.warn(f"no dump-diff page for {outdir / row['dump']}: {exc}", stacklevel=2)
            continue
        pages[row["dump"]] = f"{row['dump']}/dump_diff.html"
    return cases.assign(dump_diff=cases["dump"].map(pages).fillna(""))
