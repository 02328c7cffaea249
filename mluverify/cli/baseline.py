"""``mluverify baseline update``: make a run the committed baseline the gate compares against.

Copies the run's ``records.parquet`` (and ``summary.md`` / ``summary.csv``, for reviewing the
change in a pull request) into the baseline directory. The run is loaded first, so a missing,
corrupt or empty run never replaces a good baseline; nor does a run with failing cases or an
interrupted one, unless ``--allow-failures`` says so. Each file is replaced atomically.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

DEFAULT_TO = Path("reports/baseline")
COPIED = ("records.parquet", "summary.md", "summary.csv")


def register(subparsers: "argparse._SubParsersAction") -> None:
    parser = subparsers.add_parser("baseline", help="manage the committed baseline run",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    update = actions.add_parser("update", help="replace the baseline with a run's records")
    update.add_argument("--from", dest="source", type=Path, default=None,
                        help="run directory to take (default: [tool.mluverify] report_dir)")
    update.add_argument("--to", dest="target", type=Path, default=DEFAULT_TO,
                        help=f"baseline directory (default: {DEFAULT_TO})")
    update.add_argument("--allow-failures", action="store_true",
                        help="take a run with failing cases (or an interrupted run) all the same")
    update.set_defaults(func=update_baseline)


def update_baseline(args: argparse.Namespace) -> int:
    from mluverify.core.config import load_settings
    from mluverify.errors import RecordsError
    from mluverify.report.loading import load

    settings = load_settings(Path("pyproject.toml"))
    source = args.source or Path(settings.report_dir)
    if not source.is_dir():
        raise RecordsError(f"--from {source} is not a run directory")
    frame = load(source)
    if frame.empty:
        raise RecordsError(f"{source} holds no records; an empty run cannot become the baseline")
    failing = frame[~frame["status"].isin({"passed", "waived", *settings.allow})]
    if not args.allow_failures:
        _refuse_failing(source, failing)
    args.target.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (source / name).exists():
            _replace(source / name, args.target / name)
    print(f"baseline {args.target} updated from {source}: {len(frame)} records, {len(failing)} failing")
    return 0


def _refuse_failing(source: Path, failing) -> None:
    """A baseline is what the gate accepts: a run with failing cases (status neither passed,
    waived nor allowed by ``[tool.mluverify] allow``) or an interrupted run is refused."""
    from mluverify.errors import RecordsError
    from mluverify.report.records import read_metadata

    if read_metadata(source).get("interrupted"):
        raise RecordsError(f"{source} is an interrupted run; finish a full run, or pass --allow-failures")
    if len(failing):
        examples = ", ".join(f"{row.case_id} ({row.status})" for row in failing.head(3).itertuples())
        raise RecordsError(f"{source} has {len(failing)} failing case(s), e.g. {examples}; fix them, or "
                           f"pass --allow-failures to make them the baseline all the same")


def _replace(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically: readers see the old file or the new one."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
