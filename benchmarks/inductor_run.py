"""``make verify-inductor`` timed with cold and then warm Inductor caches, its figures from the records.

    PYTHONPATH=. .venv/bin/python benchmarks/inductor_run.py [--cache DIR] [--warm-only]

Cold: ``TORCHINDUCTOR_CACHE_DIR`` is a fresh directory (default: a new temporary one), nothing is
compiled yet. Warm: the same run again on that directory (target: at most 5 minutes on 2 cores).
For each run it prints the wall time, the load average (``uptime``) before and after (the machine
may be shared: compare figures taken at a similar load), the cases by status, the graphs Inductor
compiled (new entries in its FX graph cache), the compile time summed over the records'
``compile_s`` and per compiled graph, and the cases that did not pass.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "reports" / "runs" / "inductor"
# What `make verify-inductor` runs (without make's bootstrap step, which may reinstall the venv).
COMMAND = ("-m", "mluverify.cli", "run", "suites/networks", "suites/ops", "suites/opinfo",
           "--target", "cpu:inductor", "--report", str(REPORT))


def load() -> str:
    """The load averages (1, 5, 15 minutes) as ``uptime`` prints them."""
    return "load average: " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def compiled_graphs(cache: Path) -> int:
    """The graphs in Inductor's FX graph cache (one entry per compiled graph)."""
    root = cache / "fxgraph"
    return sum(1 for path in root.glob("*/*/*") if path.is_file()) if root.is_dir() else 0


def run_once(cache: Path, label: str) -> None:
    graphs_before = compiled_graphs(cache)
    print(f"{label}: {load()} (before)")
    started = time.perf_counter()
    code = subprocess.call([sys.executable, *COMMAND], cwd=REPO, stdout=subprocess.DEVNULL,
                           env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)})
    wall_s = time.perf_counter() - started
    records = pd.read_parquet(REPORT / "records.parquet")
    graphs = compiled_graphs(cache) - graphs_before
    compile_s = float(records["compile_s"].sum())
    print(f"{label}: {wall_s:.0f} s wall (exit {code}), {load()} (after)")
    print(f"  cases {len(records)}: " + ", ".join(f"{n} {s}" for s, n in records["status"].value_counts().items()))
    per_graph = f"{compile_s / graphs:.1f} s per compiled graph" if graphs else "no graph compiled"
    print(f"  graphs compiled {graphs}; compile time {compile_s:.0f} s over all cases, {per_graph}")
    print(f"  graph breaks in {int((records['graph_breaks'] > 0).sum())} cases, "
          f"recompiles in {int((records['recompiles'] > 0).sum())} cases")
    bad = records[records["status"] != "passed"]
    for row in bad.itertuples():
        print(f"  {row.status}: {row.case_id}: {(row.reason or row.error or row.not_fused_reason)[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=None, help="Inductor cache directory (default: a new one)")
    parser.add_argument("--warm-only", action="store_true", help="only the warm run (the cache is already filled)")
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="inductor-cache-"))
    print(f"make verify-inductor, {os.cpu_count()} cores, TORCHINDUCTOR_CACHE_DIR={cache}")
    if not args.warm_only:
        run_once(cache, "cold")
    run_once(cache, "warm")


if __name__ == "__main__":
    main()
