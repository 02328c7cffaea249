"""Constructed record sets for the report tests: every expected number is derived by hand from
the values written here. (A module with its own name rather than conftest, which several test
directories define.)"""
from __future__ import annotations

import math
from pathlib import Path


def make_record(case_id: str, value: float, *, op: str = "add", target: str = "mlu:cnnl",
                dtype: str = "float32", bound: float = 0.003, metric: str = "rel_mse",
                passed: bool | None = None, **extra) -> dict:
    """One record; ``passed`` defaults to ``value <= bound`` (False for a NaN value); ``status``
    (in ``extra``) defaults to what ``passed``, ``waived`` and ``error`` say."""
    if passed is None:
        passed = value <= bound
    headroom = bound / value if value else math.inf
    extra.setdefault("status", "errored" if extra.get("error") else "passed" if passed
                     else "waived" if extra.get("waived") else "failed")
    backend, _, mode = target.partition(":")
    return {"run_id": "run", "case_id": case_id, "suite": "ops", "op": op, "target": target,
            "backend": backend, "mode": mode, "dtype": dtype, "quant": "", "shape": "[8]",
            "metric": metric, "value": value, "bound": bound, "passed": passed, "headroom": headroom,
            "seed": 0, "reproducer": f"pytest '{case_id}'", "fallback_ops": "", "error": "",
            "waived": extra.get("status") == "waived", **extra}


def as_frame(rows: list[dict]):
    """Records as the loader returns them (through the records schema)."""
    from mluverify.report.records import to_table

    return to_table(rows).to_pandas()


def write_run(run_dir: Path, rows: list[dict], metadata: dict | None = None) -> Path:
    """A run directory holding ``rows`` as a merged records.parquet."""
    import pyarrow.parquet as pq

    from mluverify.report.records import SCHEMA_VERSION, to_table

    run_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(rows, metadata or {"schema_version": SCHEMA_VERSION}), run_dir / "records.parquet")
    return run_dir
