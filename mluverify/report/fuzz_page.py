"""The ``fuzz`` page: the findings of a fuzz corpus, each with its minimal graph and reproducers.

The page renders rows the front end made from the corpus (``FUZZ_COLUMNS``), so the report
does not import the fuzzer. Open findings are ``still failing``; the ones a replay retired to
the corpus's ``fixed/`` folder are ``fixed``. The coverage table shows, per target, how often
each op was judged on each operand dtype, least first (``COVERAGE_COLUMNS``; an op a target
never judged: dtype ``-``, judged 0), so a user sees what the campaigns have not reached.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Mapping, Sequence

from mluverify.report.render import Chip, TableSpec, html_banner, html_code, html_page, html_table

FUZZ_PAGE = "fuzz.html"
OPEN, FIXED = "still failing", "fixed"
# One row per finding: what the table shows, then what its detail view adds.
FUZZ_COLUMNS = ("signature", "state", "target", "kind", "culprit", "ops", "hits", "seed", "reason",
                "graph", "reproducer", "script")
COVERAGE_COLUMNS = ("target", "op", "dtype", "judged")
_SPEC = TableSpec(
    shown=("signature", "state", "target", "kind", "culprit", "ops", "hits"),
    long={"ops": 24},
    tone="state",
    order=(OPEN, FIXED),
    detail=(("judgement", ("reason", "seed")), ("minimal graph", ("graph",)),
            ("reproducers", ("reproducer", "script"))),
    code=("graph", "reproducer", "script"),
)


def fuzz_page_html(rows: Sequence[Mapping[str, Any]], corpus: str,
                   coverage: Sequence[Mapping[str, Any]] = ()) -> str:
    """The page for ``rows`` (one mapping per finding, keys ``FUZZ_COLUMNS``) of ``corpus``
    and its ``coverage`` (one mapping per target, op and dtype, keys ``COVERAGE_COLUMNS``)."""
    import pandas as pd

    frame = pd.DataFrame([{column: row.get(column) for column in FUZZ_COLUMNS} for row in rows],
                         columns=list(FUZZ_COLUMNS))
    open_count = int((frame["state"] == OPEN).sum())
    banner = html_banner(
        f"{open_count} open finding{'s' * (open_count != 1)} in {corpus}", "bad" if open_count else "good",
        [Chip(OPEN, open_count, "fuzz-findings"), Chip(FIXED, len(frame) - open_count, "fuzz-findings")],
        ["Each finding is a shrunk program a target got wrong; its signature is (target, kind, culprit op) "
         "where the Dumper could blame an op, else (target, kind, op sequence)."])
    graphs = "\n".join(
        f"<h3>{html.escape(f'{row[0]} ({row[1]}, {row[2]}, {row[3]})')}</h3>\n" + html_code(str(row[4]))
        for row in frame[["signature", "state", "target", "kind", "graph"]].itertuples(index=False))
    covered = pd.DataFrame(list(coverage), columns=list(COVERAGE_COLUMNS))
    sections = [("findings", html_table(frame, "fuzz-findings", _SPEC)), ("minimal graphs", graphs or "None."),
                ("coverage: judged per target, op and operand dtype, least first",
                 html_table(covered, "fuzz-coverage") if len(covered) else "No coverage recorded.")]
    return html_page(f"mluverify fuzz: {corpus}", banner, sections)


def write_fuzz_page(rows: Sequence[Mapping[str, Any]], corpus: str, outdir: str | Path,
                    coverage: Sequence[Mapping[str, Any]] = ()) -> Path:
    """Write ``fuzz.html`` for ``rows`` and ``coverage`` into ``outdir``; returns its path."""
    path = Path(outdir) / FUZZ_PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(fuzz_page_html(rows, corpus, coverage))
    return path


__all__ = ["COVERAGE_COLUMNS", "FIXED", "FUZZ_COLUMNS", "FUZZ_PAGE", "OPEN", "fuzz_page_html", "write_fuzz_page"]
