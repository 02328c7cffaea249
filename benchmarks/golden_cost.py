"""The golden (float64) reference's cost: the default op suites with it (their default: every
case marked ``mlu_golden``) against the same run with ``--mlu-golden=off``, whole pytest
processes, alternated, medians compared. Both runs use the same targets and core versions
(``[tool.mluverify]``) and pytest-xdist on every core, as ``make verify`` does.

Target (issue 12): at most 1.3x. Run: .venv/bin/python benchmarks/golden_cost.py [--repeat N]
[--core-version MLU270] (a core version or more instead of the configured ones: a shorter run).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OP_SUITES = ("suites/ops", "suites/opinfo")


def time_suites(report: Path, golden: str, core_versions: list[str]) -> tuple[float, int]:
    """Wall time of one run of the op suites and the number of records that carry a golden result."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mluverify",
                    "-n", str(os.cpu_count() or 1), f"--mlu-report={report}", f"--mlu-golden={golden}",
                    *(f"--mlu-core-version={version}" for version in core_versions), *OP_SUITES],
                   cwd=ROOT, check=False, capture_output=True)
    elapsed = time.perf_counter() - start
    import pyarrow.parquet as pq

    frame = pq.read_table(report / "records.parquet", columns=["device_error"]).to_pandas()
    return elapsed, int(frame["device_error"].notna().sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--core-version", action="append", default=[], help="instead of [tool.mluverify]'s")
    args = parser.parse_args()
    repeat, versions = args.repeat, args.core_version
    with_golden, without = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            seconds, golden_records = time_suites(Path(tmp, f"golden-{i}"), "marked", versions)
            with_golden.append(seconds)
            seconds, plain_records = time_suites(Path(tmp, f"plain-{i}"), "off", versions)
            without.append(seconds)
    on, off = statistics.median(with_golden), statistics.median(without)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    print(f"op suites, golden reference off: {off:7.1f} s ({plain_records} records with a golden result)")
    print(f"op suites, golden reference on:  {on:7.1f} s ({golden_records} records with a golden result)")
    print(f"ratio: {on / off:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
