"""``mluverify audit RUN [RUN...]``: are the tolerance bounds where the observed errors are?

Writes ``audit.csv``, ``audit.md`` and ``audit.html`` into ``--out``; prints the verdict counts
and the path of the page.
"""
from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_OUT = Path("reports/audit")  # relative to the project's root (mluverify.project)


def register(subparsers: "argparse._SubParsersAction") -> None:
    from mluverify.cli._options import bounded_number
    from mluverify.report.audit import DEFAULT_SAFETY_FACTOR

    parser = subparsers.add_parser("audit", help="per-op tolerance audit across runs",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directories or records.parquet files")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {DEFAULT_OUT} in the project's root)")
    parser.add_argument("--safety-factor", type=bounded_number(1.0), default=DEFAULT_SAFETY_FACTOR,
                        help=f"recommended bound = max observed x this (>= 1), rounded up "
                             f"(default {DEFAULT_SAFETY_FACTOR:g})")
    parser.add_argument("--bad", type=Path, action="append", default=[], metavar="RUN",
                        help="a run of known-bad variants (repeatable): also say per op which metric "
                             "separates the passing cases from them best (audit_separation.csv)")
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
    if args.bad:
        print(_write_separation(frames, [load(path) for path in args.bad], args.safety_factor, out))
    print(f"full page: {paths[2]} (also {paths[0]}, {paths[1]})")
    return 0


def _write_separation(frames: list, bad_frames: list, safety_factor: float, out: Path) -> str:
    """Write ``audit_separation.csv``; the lines to print: per group, the best separating metric."""
    import pandas as pd

    from mluverify.report.audit import separation

    table = separation(pd.concat(frames, ignore_index=True), pd.concat(bad_frames, ignore_index=True),
                       safety_factor)
    path = out / "audit_separation.csv"
    table.to_csv(path, index=False)
    lines = [f"  {row.op} {row.target} {row.dtype}: {row.best_metric or 'no metric'} catches {row.caught or 0}"
             + (f" known-bad cases (bound {row.best_bound:g})" if row.best_metric else "")
             for row in table.itertuples(index=False)]
    return "\n".join([f"separation from known-bad runs ({path}):", *lines])
