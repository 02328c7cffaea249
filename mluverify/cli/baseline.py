"""``mluverify baseline update``: make a run the committed baseline the gate compares against.

Copies the run's ``records.parquet`` (and ``summary.md`` / ``summary.csv``, for reviewing the
change in a pull request) into the baseline directory. The run is loaded first, so a missing,
corrupt or empty run never replaces a good baseline; nor does a run with failing cases, unless
``--allow-failures`` says so, or an incomplete one (killed, interrupted, stopped early), unless
``--allow-incomplete`` says so. Each file is replaced atomically.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

DEFAULT_TO = Path("reports/baseline")  # relative to the project's root (mluverify.project)
COPIED = ("records.parquet", "summary.md", "summary.csv")


def register(subparsers: "argparse._SubParsersAction") -> None:
    parser = subparsers.add_parser("baseline", help="manage the committed baseline run",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    update = actions.add_parser("update", help="replace the baseline with a run's records")
    update.add_argument("--from", dest="source", type=Path, default=None,
                        help="run directory to take (default: [tool.mluverify] report_dir)")
    update.add_argument("--to", dest="target", type=Path, default=None,
                        help=f"baseline directory (default: {DEFAULT_TO} in the project's root)")
    update.add_argument("--allow-failures", action="store_true",
                        help="take a run with failing cases all the same")
    update.add_argument("--allow-incomplete", action="store_true",
                        help="take a run that did not finish (killed, interrupted, -x) all the same")
    update.set_defaults(func=update_baseline)


def update_baseline(args: argparse.Namespace) -> int:
    from mluverify.core.config import load_settings
    from mluverify.errors import RecordsError
    from mluverify.project import find_rootdir, project_path, pyproject_of
    from mluverify.report.loading import load

    root = find_rootdir()
    settings = load_settings(pyproject_of(root))
    source = args.source or project_path(root, settings.report_dir)
    if not source.is_dir():
        raise RecordsError(f"--from {source} is not a run directory")
    frame = load(source)
    if frame.empty:
        raise RecordsError(f"{source} holds no records; an empty run cannot become the baseline")
    failing = frame[~frame["status"].isin({"passed", "waived", *settings.allow})]
    if not args.allow_incomplete:
        _refuse_incomplete(source, frame)
    if not args.allow_failures:
        _refuse_failing(source, failing)
    target = args.target or project_path(root, DEFAULT_TO)
    target.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (source / name).exists():
            _replace(source / name, target / name)
    print(f"baseline {target} updated from {source}: {len(frame)} records, {len(failing)} failing")
    return 0


def _refuse_incomplete(source: Path, frame) -> None:
    """A run that did not finish is no baseline: its missing cases would read as removed."""
    from mluverify.errors import RecordsError
    from mluverify.report.completeness import completeness_of
    from mluverify.report.records import read_metadata

    completeness = completeness_of(read_metadata(source), frame)
    if not completeness.complete:
        raise RecordsError(f"{source} is an {completeness.headline}; finish a full run, or pass "
                           f"--allow-incomplete")


def _refuse_failing(source: Path, failing) -> None:
    """A baseline is what the gate accepts: a run with failing cases (status neither passed,
    waived nor allowed by ``[tool.mluverify] allow``) is refused."""
    from mluverify.errors import RecordsError

    if len(failing):
        examples = ", ".join(f"{row.case_id} ({row.status})" for row in failing.head(3).itertuples())
        raise RecordsError(f"{source} has {len(failing)} failing case(s), e.g. {examples}; fix them, or "
                           f"pass --allow-failures to make them the baseline all the same")


def _replace(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically: readers see the old file or the new one."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
