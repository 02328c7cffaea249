"""``mluverify expectations check [RUN...]``: which waivers still hold, from the runs' records.

Reports, per waiver of ``[tool.mluverify.waivers]`` and of the expectations files
(``--file``, default ``DEFAULT_FILES``): those that match nothing in the runs, those whose
cases all pass now (per scope), expired and uncategorised ones, and counts per category.
A waiver none of whose targets ran is **not exercised** (counted per file, never stale).
``--prune`` rewrites the files without the stale entries (comments kept); ``--fail-on-stale``
exits 1 when any is stale, ``--fail-on-uncapped`` when an accuracy waiver has no ceiling
(``max``; for CI). Only runs that ran a waiver's suite can say it is stale:
check against runs that cover every suite the files name.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

# The project's expectations files besides [tool.mluverify.waivers], relative to its root.
DEFAULT_FILES = ("suites/opinfo/waivers.toml", "suites/training/waivers.toml",
                 "suites/ops/waivers.toml")  # and the compilers' (reports/*/waivers.toml)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("expectations", help="check (and prune) waivers against runs",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="report stale, expired and uncategorised waivers",
                               description=__doc__)
    check.add_argument("runs", type=Path, nargs="*", metavar="RUN",
                       help="run directories whose records are checked (several: merged; none: "
                            "only expiry, categories and ceilings are checked, no waiver is exercised)")
    check.add_argument("--file", type=Path, action="append", default=None, metavar="PATH",
                       help=f"an expectations file (repeatable; default: {', '.join(DEFAULT_FILES)})")
    check.add_argument("--prune", action="store_true", help="rewrite the files without the stale waivers")
    check.add_argument("--fail-on-stale", action="store_true", help="exit 1 when a waiver is stale")
    check.add_argument("--fail-on-uncapped", action="store_true",
                       help="exit 1 when an accuracy waiver (not skip, category not 'unsupported') has no max")
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mluverify.report.expectations_check import check_expectations, prune

    files = _expectation_files(args.file)
    checks = check_expectations(_records(args.runs), files)
    for line in _lines(checks):
        print(line)
    stale = [check for check in checks if check.stale]
    if args.prune:
        for file in files:
            removed = prune(file, [check.key for check in stale if check.source == str(file.path)])
            if removed:
                print(f"mluverify: pruned {removed} stale waiver(s) from {file.path}")
    failed_stale = args.fail_on_stale and stale and not args.prune
    failed_uncapped = args.fail_on_uncapped and any(check.uncapped for check in checks)
    return 1 if failed_stale or failed_uncapped else 0


def _expectation_files(paths: list[Path] | None) -> list:
    from mluverify.core.config import load_settings
    from mluverify.core.expectations import compiler_waiver_files, load_expectations, pyproject_expectations
    from mluverify.project import find_rootdir, pyproject_of

    if paths is not None:
        return [load_expectations(path, skippable=True) for path in paths]
    root = find_rootdir()
    pyproject = pyproject_of(root)
    return [pyproject_expectations(pyproject, load_settings(pyproject).waivers),
            *(load_expectations(root / name, skippable=True) for name in DEFAULT_FILES),
            *(load_expectations(path, skippable=True) for path in compiler_waiver_files(root))]


def _records(runs: list[Path]):
    """The runs' records, each with its run's torch version (what a waiver's torch scope needs)."""
    import pandas as pd

    from mluverify.report.loading import load
    from mluverify.report.records import check_run_dir, read_metadata

    frames = [load(check_run_dir(run)).assign(torch_version=read_metadata(run).get("torch_version") or None)
              for run in runs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["case_id", "status"])


def _lines(checks: list) -> list[str]:
    flagged = [f"{check.source}: {check.key!r}: {'; '.join(check.problems)}" for check in checks if check.problems]
    # per file and reason, not per waiver: a run of the MLU targets leaves every real compiler's
    # hundreds of waivers unexercised, and a line each would drown the stale ones
    unexercised = Counter((check.source, check.not_exercised) for check in checks if check.not_exercised)
    categories = Counter(check.waiver.category or "uncategorised" for check in checks)
    stale = sum(check.stale for check in checks)
    passing = sum(check.passing for check in checks)
    return [*flagged,
            *(f"{source}: {count} waiver{'s' if count > 1 else ''} {why}"
              for (source, why), count in unexercised.items()),
            f"mluverify: {len(checks)} waivers: {stale} stale ({sum(c.matches_nothing for c in checks)} match "
            f"nothing, {sum(c.all_pass for c in checks)} whose cases all pass), "
            f"{sum(not c.exercised for c in checks)} not exercised (none of their targets ran), "
            f"{passing} waived cases pass now, {sum(c.expired for c in checks)} expired, "
            f"{sum(c.uncapped for c in checks)} accuracy waivers without a ceiling",
            "categories: " + ", ".join(f"{name} {count}" for name, count in sorted(categories.items()))]
