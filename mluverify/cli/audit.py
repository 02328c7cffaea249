"""``mluverify audit RUN [RUN...]``: are the tolerance bounds where the observed errors are?

Writes ``audit.csv``, ``audit.md`` and ``audit.html`` into ``--out``; prints the verdict counts
and the path of the page.
"""
from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_OUT = Path("reports/audit")  # relative to the project's root (mluverify.project)


def register(subparsers: "argparse._SubParsersAction") -> None:
    from mluverify.report.audit import DEFAULT_SAFETY_FACTOR

    parser = subparsers.add_parser("audit", help="per-op tolerance audit across runs",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directories or records.parquet files")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {DEFAULT_OUT} in the project's root)")
    parser.add_argument("--safety-factor", type=float, default=DEFAULT_SAFETY_FACTOR,
                        help=f"recommended bound = max observed x this, rounded up (default {DEFAULT_SAFETY_FACTOR:g})")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from mluverify.project import find_rootdir, project_path
    from mluverify.report.audit import audit_runs
    from mluverify.report.loading import load
    from mluverify.report.pages import audit_documents, audit_summary
    from mluverify.report.finish import write_files
    from mluverify.report.tables import error_points

    frames = [load(path) for path in args.runs]
    result = audit_runs(frames, safety_factor=args.safety_factor)
    points = error_points(pd.concat(frames, ignore_index=True))
    markdown, page = audit_documents(result, points, [str(path) for path in args.runs])
    out = args.out or project_path(find_rootdir(), DEFAULT_OUT)
    paths = write_files(out, {"audit.csv": result.groups.to_csv(index=False), "audit.md": markdown,
                                   "audit.html": page})
    print(f"mluverify audit: {audit_summary(result)}")
    print(f"full page: {paths[2]} (also {paths[0]}, {paths[1]})")
    return 0
