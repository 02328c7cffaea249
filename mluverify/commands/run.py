"""``mluverify run``: the verification suites under pytest with the mluverify plugin.

The same as ``pytest -p mluverify suites/ -n auto --mlu-report reports/latest``; extra
arguments after ``--`` go to pytest unchanged.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from mluverify.config import load_settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run the verification suites, write the report",
                                   description=__doc__)
    parser.add_argument("paths", nargs="*", default=["suites"], help="suite paths (default: suites)")
    parser.add_argument("--target", action="append", default=[], metavar="BACKEND:MODE",
                        help="target (repeatable); default: [tool.mluverify] targets")
    parser.add_argument("--report", default=None, metavar="DIR",
                        help="report directory (default: [tool.mluverify] report_dir); JUnit XML goes there too")
    parser.add_argument("--workers", default="auto",
                        help="pytest-xdist workers: a number, 'auto' (all cores) or 0 for none")
    parser.set_defaults(func=run)


def pytest_arguments(args: argparse.Namespace) -> list[str]:
    """The pytest command line ``mluverify run`` stands for."""
    argv = ["-p", "mluverify", *args.paths]
    argv += [f"--mlu-target={target}" for target in args.target]
    report = args.report or load_settings(Path("pyproject.toml")).report_dir
    argv += [f"--mlu-report={report}", f"--junitxml={report}/junit.xml"]
    if str(args.workers) != "0":
        argv += ["-n", str(os.cpu_count() if args.workers == "auto" else args.workers)]
    return argv + list(getattr(args, "passthrough", []))


def run(args: argparse.Namespace) -> int:
    import pytest

    return int(pytest.main(pytest_arguments(args)))
