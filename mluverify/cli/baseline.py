"""``mluverify baseline update``: make a run the committed baseline the gate compares against.

Copies the run's ``records.parquet`` (and ``summary.md`` / ``summary.csv``, for reviewing the
change in a pull request, with the fuzz page ``summary.md`` links) into the baseline directory. The run is loaded first, so a missing,
corrupt or empty run never replaces a good baseline; nor does a run with failing cases, unless
``--allow-failures`` says so, or an incomplete one (killed, interrupted, stopped early), unless
``--allow-incomplete`` says so. Each file is replaced atomically.

``--runs A B C`` takes repeated runs of the same suites instead: each is checked the same way,
the first becomes the baseline, and the mean and spread of every case's judged metric over all
of them is kept beside it (``spread.parquet``, ``mluverify.report.spread``): the gate then lets
a noisy case vary as much as it was measured to. A baseline taken from one run drops the spread
a previous ``--runs`` left, which described other records.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from mluverify.report.fuzz_page import FUZZ_PAGE

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_TO = Path("reports/baseline")  # relative to the project's root (mluverify.project)
COPIED = ("records.parquet", "summary.md", "summary.csv", FUZZ_PAGE)


def register(subparsers: "argparse._SubParsersAction") -> None:
    parser = subparsers.add_parser("baseline", help="manage the committed baseline run",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    update = actions.add_parser("update", help="replace the baseline with a run's records")
    sources = update.add_mutually_exclusive_group()
    sources.add_argument("--from", dest="source", type=Path, default=None,
                         help="run directory to take (default: [tool.mluverify] report_dir)")
    sources.add_argument("--runs", type=Path, nargs="+", default=None, metavar="RUN",
                         help="two or more repeated runs: the first becomes the baseline, the spread of "
                              "each case's metric over all of them is kept beside it")
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

    root = find_rootdir()
    settings = load_settings(pyproject_of(root))
    if args.runs is not None and len(args.runs) < 2:
        raise RecordsError(f"--runs {args.runs[0]}: a spread needs at least two runs; take one run with --from")
    sources = args.runs or [args.source or project_path(root, settings.report_dir)]
    frames = [_checked(source, args, settings) for source in sources]
    source, frame = sources[0], frames[0]
    target = args.target or project_path(root, DEFAULT_TO)
    target.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        if (source / name).exists():
            _replace(source / name, target / name)
    failing = frame[~frame["status"].isin({"passed", "waived", *settings.allow})]
    print(f"baseline {target} updated from {source}: {len(frame)} records, {len(failing)} failing")
    _keep_spread(target, frames, sources)
    return 0


def _checked(source: Path, args: argparse.Namespace, settings) -> "pd.DataFrame":
    """The records of the run ``source``, refused when it cannot be a baseline."""
    from mluverify.errors import RecordsError
    from mluverify.report.loading import load

    if not source.is_dir():
        raise RecordsError(f"{'--runs' if args.runs else '--from'} {source} is not a run directory")
    frame = load(source)
    if frame.empty:
        raise RecordsError(f"{source} holds no records; an empty run cannot become the baseline")
    if not args.allow_incomplete:
        _refuse_incomplete(source, frame)
    if not args.allow_failures:
        _refuse_failing(source, frame[~frame["status"].isin({"passed", "waived", *settings.allow})])
    return frame


def _keep_spread(target: Path, frames: list, sources: list[Path]) -> None:
    """Write the spread of repeated runs beside the baseline; remove a stale one after a single run."""
    from mluverify.report.spread import SPREAD_FILE, measure_spread, write_spread

    if len(frames) < 2:
        if (target / SPREAD_FILE).exists():
            (target / SPREAD_FILE).unlink()
            print(f"removed {target / SPREAD_FILE}: it measured another baseline's runs")
        return
    spread = measure_spread(frames)
    noisy = int((spread["spread"] > 0).sum())
    print(f"spread of {len(spread)} cases over {len(sources)} runs kept in {write_spread(target, spread)} "
          f"({noisy} vary between runs)")


def _refuse_incomplete(source: Path, frame) -> None:
    """A run that did not finish is no baseline: its missing cases would read as removed."""
    from mluverify.errors import RecordsError
    from mluverify.report.completeness import completeness_of
    from mluverify.report.records import read_metadata

    completeness = completeness_of(read_metadata(source), frame)
    if not completeness.complete:
        raise RecordsError(f"{source} is {completeness.headline}; finish a full run, or pass "
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
