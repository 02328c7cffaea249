"""``mluverify parity RUN... --reference mlu:cnnl``: per case (and core version), the status each
target gave it, across runs (several: merged, e.g. ``mlu:cnnl`` on one machine and
``cpu:inductor`` on another), and the gaps where the reference target passes and another does not. Prints the gap counts and the rows with a gap (``--all``: every
row; ``--status``, ``--case``: filters); ``--html PATH`` writes the filterable table.
``--by-family``: per op family and target, how many cases pass (agree with the CPU, and with
float64 where the golden rule judged), and the cases that fail on two or more back ends.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mluverify.report.parity import FamilyParity


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
    parser.add_argument("--by-family", action="store_true",
                        help="per op family x target: cases passed/judged, and deviations shared by back ends")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH", help="write the matrix as an HTML page")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from mluverify.report.loading import load
    from mluverify.report.parity import family_parity, filtered, gap_line, parity, parity_html
    from mluverify.report.records import check_run_dir
    from mluverify.report.render import html_banner, html_page

    records = pd.concat([load(check_run_dir(run))[["case_id", "target", "core_version", "status", "suite", "op"]]
                         for run in args.runs], ignore_index=True)
    if args.by_family:
        return _print_families(family_parity(records))
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


def _print_families(families: "FamilyParity") -> int:
    print("cases passed / judged per op family and target:")
    print(families.table.to_string())
    if len(families.shared):
        print(f"deviations shared by two or more back ends ({len(families.shared)} cases):")
        print(families.shared.to_string(index=False))
    else:
        print("no deviation shared by two or more back ends")
    return 0
