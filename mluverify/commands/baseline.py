"""``mluverify baseline update``: make a run the committed baseline the gate compares against.

Copies the run's ``records.parquet`` (and ``summary.md`` / ``summary.csv``, for reviewing the
change in a pull request) into the baseline directory. The run is loaded first, so a missing,
corrupt or empty run never replaces a good baseline; each file is replaced atomically.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

DEFAULT_FROM = Path("reports/latest")
DEFAULT_TO = Path("reports/baseline")
COPIED = ("records.parquet", "summary.md", "summary.csv")


def register(subparsers: "argparse._SubParsersAction") -> None:
    parser = subparsers.add_parser("baseline", help="manage the committed baseline run",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    update = actions.add_parser("update", help="replace the baseline with a run's records")
    update.add_argument("--from", dest="source", type=Path, default=DEFAULT_FROM,
                        help=f"run directory to take (default: {DEFAULT_FROM})")
    update.add_argument("--to", dest="target", type=Path, default=DEFAULT_TO,
                        help=f"baseline directory (default: {DEFAULT_TO})")
    update.set_defaults(func=update_baseline)


def update_baseline(args: argparse.Namespace) -> int:
    from mluverify.errors import RecordsError
    from mluverify.report.loading import load

    if not args.source.is_dir():
        raise RecordsError(f"--from {args.source} is not a run directory")
    frame = load(args.source)
    if frame.empty:
        raise RecordsError(f"{args.source} holds no records; an empty run cannot become the baseline")
    args.target.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (args.source / name).exists():
            _replace(args.source / name, args.target / name)
    failed = int((~frame["passed"].fillna(False).astype(bool)).sum())
    print(f"baseline {args.target} updated from {args.source}: {len(frame)} records, {failed} failing")
    return 0


def _replace(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically: readers see the old file or the new one."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
