"""Built-in report outputs of a run: ``summary.csv``, ``summary.md`` (for CI logs) and a
self-contained ``report.html`` with embedded plots."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mluverify.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd


@hookimpl
def mluverify_report(frame: "pd.DataFrame", outdir: Path) -> None:
    from mluverify.report.pages import report_documents
    from mluverify.report.session import write_files
    from mluverify.report.tables import run_tables

    tables = run_tables(frame)
    runs = ", ".join(sorted(frame["run_id"].dropna().astype(str).unique())) or Path(outdir).name
    markdown, page = report_documents(tables, f"mluverify report: {runs}")
    write_files(Path(outdir), {
        "summary.csv": tables.summary.to_csv(index=False),
        "summary.md": markdown,
        "report.html": page,
    })
