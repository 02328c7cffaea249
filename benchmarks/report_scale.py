"""Report figures at scale, on synthetic records (numpy, seeded):

- load + summarize 1,000,000 records (budget 10 s);
- the run report (report.html with its plots, summary.csv, summary.md) for 10,000 cases (15 s),
  and the size of that report.html (10 MB);
- in headless Chromium (Selenium, Debian's chromium + chromium-driver), on that page: filtering
  the 10,000-row case list by text (200 ms) and sorting it by a column (500 ms), each timed in
  the page with ``performance.now()`` from the call to the rows drawn and laid out;
- ``mluverify diff`` of two 100,000-record runs: load both, diff, write diff.md / diff.html (5 s).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/report_scale.py [--repeat 3] [--dir DIR]``.
Prints the median of each figure over ``--repeat`` runs, wall clock and CPU time (writing the
synthetic records is not timed). Not a timed test: it prints.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mluverify.report.records import SCHEMA_VERSION, arrow_schema, with_metadata

OPS = [f"op{i:02d}" for i in range(60)]
TARGETS = {"mlu:cnnl": 0.003, "mlu:cnml": 0.02, "cuda:eager": 0.003, "torch_mlu:cnnl": 0.003}
DTYPES = ["float32", "float16", "bfloat16"]


def synthetic_run(path: Path, n: int, seed: int, drift: float = 1.0) -> Path:
    """Write ``n`` records (``run_id`` ``run<seed>``) to ``path/records.parquet``: errors lognormal
    around a tenth of the bound, times ``drift``; about 1 % fail. Case ids depend on the row only,
    so two runs of the same ``n`` hold the same cases."""
    rng = np.random.default_rng(seed)
    rows = np.arange(n)
    op, target, dtype = np.array(OPS)[rows % len(OPS)], np.array(list(TARGETS))[rows % 4], np.array(DTYPES)[rows % 3]
    bound = np.array(list(TARGETS.values()))[rows % 4]
    value = bound * 0.1 * drift * rng.lognormal(0.0, 1.0, n)
    case_id = np.char.add(np.char.add(np.char.add("suites/ops/test_ops.py::test_", op), "["), np.char.add(rows.astype(str), "]"))
    columns = {
        "run_id": np.full(n, f"run{seed}"), "case_id": case_id, "suite": np.full(n, "ops"), "op": op,
        "target": target, "backend": np.char.partition(target, ":")[:, 0], "mode": np.char.partition(target, ":")[:, 2],
        "dtype": dtype, "quant": np.full(n, ""), "shape": np.full(n, "[16, 32]"), "metric": np.full(n, "rel_mse"),
        "value": value, "bound": bound, "passed": value <= bound, "headroom": bound / value,
        "rel_mse": value, "rae": value, "rma": value * 0.1, "max_abs": value * 10, "max_rel": value * 100,
        "cosine": 1 - value, "sqnr_db": -20 * np.log10(value), "nan_mismatch": np.zeros(n, dtype=np.int64),
        "fallback_ops": np.where(rows % 50 == 0, "aten::erf", ""), "seed": rows.astype(np.int64),
        "reproducer": np.char.add("pytest ", case_id), "duration_s": rng.uniform(0.001, 0.01, n),
        "error": np.full(n, ""), "waived": np.zeros(n, dtype=bool),
        # every status shows up: a few cases ran on the CPU or layer by layer
        "status": np.select([value > bound, rows % 97 == 0, rows % 89 == 0], ["failed", "not_on_device", "not_fused"],
                            "passed"),
    }
    schema = arrow_schema()
    # columns not synthesized here (added to the schema later) are left null
    arrays = [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type) for f in schema]
    table = pa.Table.from_arrays(arrays, schema=schema)
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(with_metadata(table, {"schema_version": SCHEMA_VERSION, "run_id": f"run{seed}"}), path / "records.parquet")
    return path


def median_seconds(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of ``work`` (CPU time: this process, all threads; on a
    shared machine it moves far less than wall clock does)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def load_and_summarize(run: Path) -> None:
    from mluverify.report.loading import load
    from mluverify.report.tables import summarize

    summarize(load(run))


def run_report(run: Path) -> None:
    from mluverify.plugins.report_writers import mluverify_report
    from mluverify.report.loading import load

    mluverify_report(load(run), run)


# Runs in the page: the time from a filter / sort call until its rows are drawn and laid out.
BROWSER_TIMING = """
const table = window.mluverifyTables.cases, value = table.spec.columns.indexOf("value");
const timed = (work) => { const start = performance.now(); work(); document.body.offsetHeight;
                          return performance.now() - start; };
const filters = ["op07", "float16", "op42[1", "cnml"].map((text) => timed(() => table.filter(text)));
timed(() => table.filter(""));
const sorts = [timed(() => table.sort(value)), timed(() => table.sort(value))];
return {rows: table.rows.length, filters, sorts, shown: table.visible.length};
"""


def browser_timings(page: Path, repeat: int) -> dict[str, float] | None:
    """Median filter and sort times (ms) of the case list of ``page`` in headless Chromium, or
    None without a browser."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))
    import browser

    if browser.missing():
        print(f"browser figures skipped: {browser.missing()}")
        return None
    driver = browser.start()
    try:
        results = []
        for _ in range(repeat):
            driver.get(page.as_uri())
            results.append(driver.execute_script(BROWSER_TIMING))
    finally:
        driver.quit()
    return {"rows": results[0]["rows"],
            "filter": statistics.median(t for r in results for t in r["filters"]),
            "sort": statistics.median(t for r in results for t in r["sorts"])}


def diff_command(base: Path, new: Path) -> None:
    from mluverify.report.diff import diff_runs
    from mluverify.report.loading import load
    from mluverify.report.pages import diff_documents
    from mluverify.report.finish import write_files

    result = diff_runs(load(base), load(new))
    markdown, page = diff_documents(result, str(base), str(new))
    write_files(new, {"diff.md": markdown, "diff.html": page})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write the synthetic runs (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        figures = [
            ("load + summarize 1,000,000 records", 10.0, lambda run=synthetic_run(root / "1m", 1_000_000, 1): load_and_summarize(run)),
            ("report.html + summary for 10,000 cases", 15.0, lambda run=synthetic_run(root / "10k", 10_000, 2): run_report(run)),
            ("diff of two 100,000-record runs", 5.0, lambda base=synthetic_run(root / "base", 100_000, 3),
             new=synthetic_run(root / "new", 100_000, 4, drift=1.2): diff_command(base, new)),
        ]
        for name, budget, work in figures:
            wall, cpu = median_seconds(work, args.repeat)
            print(f"{name:<42} {wall:6.2f} s  (budget {budget:g} s; CPU {cpu:.2f} s; median of {args.repeat})", flush=True)
        page = root / "10k" / "report.html"
        print(f"{'report.html size for 10,000 cases':<42} {page.stat().st_size / 1e6:6.2f} MB (budget 10 MB)")
        timings = browser_timings(page, args.repeat)
        if timings:
            print(f"{'filter ' + format(timings['rows'], ',') + ' rows in Chromium':<42} {timings['filter']:6.1f} ms "
                  f"(budget 200 ms, median of {args.repeat} x 4 filters)")
            print(f"{'sort ' + format(timings['rows'], ',') + ' rows in Chromium':<42} {timings['sort']:6.1f} ms "
                  f"(budget 500 ms, median of {args.repeat} x 2 sorts)", flush=True)


if __name__ == "__main__":
    main()
