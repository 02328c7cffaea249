"""``mluverify parity RUN... --reference mlu:cnnl``: per case (and core version), the status each
target gave it, across runs (several: merged, e.g. ``mlu:cnnl`` on one machine and
``cpu:inductor`` on another), and the gaps where the reference target passes and another does not. Prints the gap counts and the rows with a gap (``--all``: every
row; ``--status``, ``--case``: filters); ``--html PATH`` writes the filterable table.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("parity", help="cases x targets statuses and gaps against a reference target",
                                   description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directories (merged)")
    parser.add_argument("--reference", default="mlu:cnnl", metavar="TARGET",
                        help="the target whose passes the others are held to (default: mlu:cnnl)")
    parser.add_argument("--all", action="store_true", help="print every case, not only those with a gap")
    parser.add_argument("--status", action="append", default=[], metavar="STATUS",
                        help="only cases with this status on some target (repeatable)")
    parser.add_argument("--case", default="", metavar="TEXT", help="only cases whose id holds TEXT")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH", help="write the matrix as an HTML page")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from mluverify.report.loading import load
    from mluverify.report.parity import filtered, gap_line, parity, parity_html
    from mluverify.report.records import check_run_dir
    from mluverify.report.render import html_banner, html_page

    records = pd.concat([load(check_run_dir(run))[["case_id", "target", "core_version", "status"]]
                         for run in args.runs], ignore_index=True)
    result = parity(records, args.reference)
    print(gap_line(result))
    rows = filtered(result, gaps_only=not args.all, statuses=args.status, contains=args.case)
    if len(rows):
        print(rows.to_string(index=False))
    if args.html is not None:
        page = html_page("mluverify parity", html_banner(gap_line(result), "muted", []),
                         [("Parity", parity_html(result))])
        args.html.write_text(page, encoding="utf-8")
        print(f"mluverify: parity table: {args.html}")
    return 0
