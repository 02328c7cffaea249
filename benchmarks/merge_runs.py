"""Merging the runs of several machines: ``mluverify report --merge`` of 3 slices x 100,000
records (budget 5 s), beside the floor of the same work — reading the three records files and
writing one — so the ratio shows what the merge's checks (versions, overlapping case ids) cost.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/merge_runs.py [--records 100000] [--repeat 3]``.
Prints the medians over ``--repeat`` runs, wall clock and CPU time; making the synthetic slices
(``report_scale.synthetic_run``, case ids made disjoint per slice) is not timed. Not a timed test.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mluverify.report.merging import merge_runs
from mluverify.report.records import run_metadata, write_metadata
from report_scale import median_seconds, synthetic_run

SLICES = 3
BUDGET_S = 5.0


def make_slices(root: Path, records: int) -> list[Path]:
    """``SLICES`` runs of ``records`` records each, of one software version, disjoint case ids."""
    metadata = run_metadata("slice")
    slices = []
    for index in range(SLICES):
        path = synthetic_run(root / f"slice-{index}", records, seed=index)
        table = pq.read_table(path / "records.parquet")
        case_ids = pc.binary_join_element_wise(f"slice{index}/", table["case_id"], "")
        table = table.set_column(table.schema.get_field_index("case_id"), "case_id", case_ids)
        pq.write_table(table, path / "records.parquet")
        write_metadata(path, {**metadata, "run_id": f"slice{index}"})
        slices.append(path)
    return slices


def merge(slices: list[Path], into: Path) -> None:
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir()
    merge_runs(slices, into)


def read_and_write(slices: list[Path], into: Path) -> None:
    """The floor: the same files read and one written, nothing checked."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir()
    pq.write_table(pa.concat_tables([pq.read_table(path / "records.parquet") for path in slices]),
                   into / "records.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per slice")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        slices = make_slices(Path(tmp), args.records)
        merged_wall, merged_cpu = median_seconds(lambda: merge(slices, Path(tmp) / "merged"), args.repeat)
        floor_wall, floor_cpu = median_seconds(lambda: read_and_write(slices, Path(tmp) / "floor"), args.repeat)
        rows = pq.read_metadata(Path(tmp) / "merged" / "records.parquet").num_rows
    assert rows == SLICES * args.records, rows
    print(f"merge {SLICES} x {args.records:,} records: {merged_wall:.2f} s wall, {merged_cpu:.2f} s CPU "
          f"(budget {BUDGET_S:g} s: {'within' if merged_wall <= BUDGET_S else 'OVER'})")
    print(f"read + write the same records, nothing checked: {floor_wall:.2f} s wall, {floor_cpu:.2f} s CPU "
          f"(merge / floor: {merged_wall / floor_wall:.2f})")


if __name__ == "__main__":
    main()
