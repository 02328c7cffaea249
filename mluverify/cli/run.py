"""``mluverify run``: the verification suites under pytest with the mluverify plugin.

The same as ``pytest -p mluverify [PATH...] -n auto --mlu-report DIR``: without paths, pytest's
own choice (the project's ``testpaths``, else the current directory). JUnit XML is written into
the report directory with the run. Extra arguments after ``--`` go to pytest unchanged; the
exit code is pytest's, except that its usage error (4) is 2 like every usage error here.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from mluverify.cli._options import worker_count
from mluverify.core.config import load_settings
from mluverify.errors import InvalidArgument
from mluverify.project import find_rootdir, project_path, pyproject_of


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run the verification suites, write the report",
                                   description=__doc__)
    parser.add_argument("paths", nargs="*", default=[],
                        help="test paths or node ids (default: the project's testpaths)")
    parser.add_argument("--target", action="append", default=[], metavar="BACKEND:MODE",
                        help="target (repeatable); default: [tool.mluverify] targets")
    parser.add_argument("--report", default=None, metavar="DIR",
                        help="report directory (default: [tool.mluverify] report_dir); JUnit XML goes there too")
    parser.add_argument("--workers", type=worker_count, default="auto",
                        help="pytest-xdist workers: a number, 'auto' (all cores) or 0 for none")
    parser.set_defaults(func=run)


def pytest_arguments(args: argparse.Namespace) -> list[str]:
    """The pytest command line ``mluverify run`` stands for."""
    from mluverify.report.rundir import RunDirectory

    _check_paths(args.paths)
    argv = ["-p", "mluverify", *args.paths]
    argv += [f"--mlu-target={target}" for target in args.target]
    root = find_rootdir(args.paths)  # pytest's rootdir for these paths: [tool.mluverify] is read there
    report = Path(args.report or project_path(root, load_settings(pyproject_of(root)).report_dir))
    # Written into the run while it is being built, so it is swapped in with the run.
    argv += [f"--mlu-report={report}", f"--junitxml={RunDirectory(report).staging / 'junit.xml'}"]
    if args.workers != 0:
        argv += ["-n", str(os.cpu_count() if args.workers == "auto" else args.workers)]
    return argv + list(getattr(args, "passthrough", []))


def _check_paths(paths: list[str]) -> None:
    """Refuse missing test paths before pytest starts (exit 2, like every usage error here)."""
    from mluverify.pytest_plugin.run import missing_paths

    missing = missing_paths(paths, Path.cwd())
    if missing:
        raise InvalidArgument(f"test path(s) not found: {', '.join(missing)} (from {Path.cwd()})")


def run(args: argparse.Namespace) -> int:
    import pytest

    code = pytest.main(pytest_arguments(args))
    # pytest has printed its usage error (an unknown target, a bad --mlu-* value); exit 2 like
    # every usage error of this command.
    return 2 if code == pytest.ExitCode.USAGE_ERROR else int(code)
