"""The default verification run (what ``make verify`` runs), timed, and its figures from the records.

    PYTHONPATH=. .venv/bin/python benchmarks/verify_run.py [--report DIR] [--workers N] [-- PYTEST_ARGS]

Runs ``mluverify run`` (``pytest -p mluverify suites -n <cores>`` with the [tool.mluverify]
targets) in a subprocess and prints, from ``records.parquet``: the run time (target: at most
10 minutes on 2 cores), the number of cases (comparisons), the pass rate per target (waived
cases counted apart), and the OpInfo cases run with their pass rate and how many ran an op on
the CPU (fallback).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def run_default_selection(report: Path, workers: str, pytest_args: list[str]) -> tuple[float, int]:
    """Run the default selection; return the wall time in seconds and pytest's exit code."""
    command = [sys.executable, "-m", "mluverify.cli", "run", "--report", str(report), "--workers", workers]
    if pytest_args:
        command += ["--", *pytest_args]
    started = time.perf_counter()
    exit_code = subprocess.call(command, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, exit_code


def per_target(records: pd.DataFrame) -> pd.DataFrame:
    """Cases, passed, waived, failed and the pass rate (passed / not waived) per target."""
    grouped = records.groupby("target")
    table = pd.DataFrame({
        "cases": grouped.size(),
        "passed": grouped["passed"].sum(),
        "waived": grouped["waived"].sum(),
    })
    table["failed"] = table["cases"] - table["passed"] - table["waived"]
    table["pass_rate"] = table["passed"] / (table["cases"] - table["waived"])
    return table


def opinfo_figures(records: pd.DataFrame) -> dict[str, float]:
    opinfo = records[records["suite"] == "opinfo"]
    return {
        "cases": len(opinfo),
        "entries": opinfo["op"].nunique(),
        "pass_rate": float(opinfo["passed"].mean()) if len(opinfo) else float("nan"),
        "with_cpu_fallback": int((opinfo["fallback_ops"] != "").sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=REPO / "reports" / "latest")
    parser.add_argument("--workers", default=str(os.cpu_count()))
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    seconds, exit_code = run_default_selection(args.report, args.workers,
                                               [a for a in args.pytest_args if a != "--"])
    records = pd.read_parquet(args.report / "records.parquet")
    print(f"default selection: {seconds:.0f} s wall on {args.workers} workers (target <= 600 s), "
          f"pytest exit code {exit_code}")
    print(f"cases (comparisons): {len(records)}; errors (device raised): {(records['error'] != '').sum()}")
    print(per_target(records).to_string(float_format=lambda v: f"{v:.4f}"))
    opinfo = opinfo_figures(records)
    print(f"OpInfo: {opinfo['cases']} cases from {opinfo['entries']} entries, pass rate "
          f"{opinfo['pass_rate']:.4f}, {opinfo['with_cpu_fallback']} ran an op on the CPU")


if __name__ == "__main__":
    main()
