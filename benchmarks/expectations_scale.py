"""``mluverify expectations check`` and ``mluverify parity`` on a merged run of 100,000 records
(budget 5 s each), beside the time to load that run.

The synthetic run (seeded): 25,000 cases on four targets (``mlu:cnnl``, ``mlu:cnml``,
``cpu:inductor``, ``cuda:eager``), two core versions, about 3 % failing and 1 % waived; an
expectations file of 60 waivers (case-id globs, some scoped to a core version, 20 matching
nothing). Writing the run is not timed.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/expectations_scale.py [--records 100000] [--repeat 3]``.
Prints the median wall-clock seconds of each figure. Not a timed test: it prints.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.parquet as pq

from mluverify.core.expectations import load_expectations
from mluverify.report.expectations_check import check_expectations
from mluverify.report.loading import load
from mluverify.report.parity import parity
from mluverify.report.records import SCHEMA_VERSION, to_table

TARGETS = ("mlu:cnnl", "mlu:cnml", "cpu:inductor", "cuda:eager")
CORES = ("MLU270", "MLU370")
OPS = [f"op{i:02d}" for i in range(40)]


def synthetic_run(run_dir: Path, n: int, seed: int = 0) -> Path:
    """``n`` records: case ``row // 4`` on target ``row % 4``."""
    rng = np.random.default_rng(seed)
    draw = rng.uniform(size=n)
    rows = []
    for row in range(n):
        case, target = row // len(TARGETS), TARGETS[row % len(TARGETS)]
        core = CORES[case % 2]
        status = "failed" if draw[row] < 0.03 else "waived" if draw[row] < 0.04 else "passed"
        rows.append({"run_id": "run", "case_id": f"suites/ops/test_ops.py::test_{OPS[case % 40]}[{target}-{core}-{case}]",
                     "op": OPS[case % 40], "target": target, "core_version": core, "device_impl": "emulator",
                     "metric": "rel_mse", "value": 0.001, "bound": 0.003, "passed": status == "passed",
                     "waived": status == "waived", "status": status})
    run_dir.mkdir(parents=True)
    pq.write_table(to_table(rows, {"schema_version": SCHEMA_VERSION}), run_dir / "records.parquet")
    return run_dir


def expectations_file(path: Path) -> Path:
    """60 waivers: 40 per op (half scoped to MLU270), 20 on ops that do not exist."""
    lines = ["[waivers]"]
    for i, op in enumerate(OPS):
        scope = ', scope = { cores = ["MLU270"] }' if i % 2 else ""
        lines.append(f'"suites/ops/test_ops.py::test_{op}[*-1?]" = {{ reason = "r", until = "2099-01-01", '
                     f'category = "quantization"{scope} }}')
    lines += [f'"suites/ops/test_ops.py::test_gone{i}[*]" = {{ reason = "r", until = "2099-01-01" }}' for i in range(20)]
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(label: str, fn: Callable[[], object], repeat: int) -> None:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    print(f"{label:44} {statistics.median(seconds):6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = synthetic_run(Path(tmp) / "run", args.records)
        file = load_expectations(expectations_file(Path(tmp) / "waivers.toml"))
        records = load(run_dir)
        print(f"{len(records)} records, {len(file.waivers)} waivers")
        timed("load the run", lambda: load(run_dir), args.repeat)
        timed("expectations check (loaded records)", lambda: check_expectations(records, [file]), args.repeat)
        timed("parity --reference mlu:cnnl (loaded records)", lambda: parity(records, "mlu:cnnl"), args.repeat)


if __name__ == "__main__":
    main()
