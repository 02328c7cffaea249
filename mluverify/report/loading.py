"""Loading a run's records into the one long DataFrame every report is computed from.

A records file carries its schema version in the parquet schema metadata (key ``mluverify``).
Older versions are migrated step by step through ``MIGRATIONS``; newer versions (written by a
later mluverify) and files that are not mluverify records at all are refused, naming the file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mluverify.errors import RecordsError
from mluverify.report.records import COLUMNS, RECORDS_FILE, SCHEMA_VERSION, SHARD_DIR

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


def derived_status(table: "pa.Table") -> "pa.ChunkedArray":
    """The status a record's ``passed`` / ``waived`` / ``error`` imply: errored, passed, waived
    or failed (what version 1 recorded, and what a writer that sets no status means)."""
    import pyarrow.compute as pc

    errored = pc.not_equal(pc.fill_null(table["error"], ""), "")
    return pc.if_else(errored, "errored",
                      pc.if_else(pc.fill_null(table["passed"], False), "passed",
                                 pc.if_else(pc.fill_null(table["waived"], False), "waived", "failed")))


# The columns each schema version added.
_V2_COLUMNS = ("status", "kind", "leaf", "executed_as", "op_on_cpu", "not_fused_reason", "device_impl",
               "core_version", "core_number", "device_error", "reference_error", "error_ratio",
               "compile_s", "graph_breaks", "recompiles", "model", "call_site")
_V3_COLUMNS = ("worst",)
_V4_COLUMNS = ("raw_rel_mse", "eps_zeroed", "ulp_max", "ulp_p99", "tolerance_metric", "tolerance_bound",
               "tolerance_source", "waiver_reason", "waiver_until")
_V5_COLUMNS = ("task_metric", "task_value", "task_reference", "task_threshold", "task_samples", "task_alpha",
               "task_beta", "task_effect")


def _with_columns(table: "pa.Table", names: tuple[str, ...], filled: dict | None = None) -> "pa.Table":
    """``table`` with the columns ``names`` it lacks appended: from ``filled`` (name -> array),
    else null."""
    import pyarrow as pa

    from mluverify.report.records import arrow_schema

    schema = arrow_schema()
    for name in names:
        if name in table.column_names:
            continue
        field = schema.field(name)
        column = (filled or {}).get(name, pa.nulls(len(table), field.type))
        table = table.append_column(field, column.cast(field.type))
    return table


def _v1_to_v2(table: "pa.Table") -> "pa.Table":
    """Version 2 adds status and provenance columns: a version-1 record's status follows from
    ``passed`` / ``waived`` / ``error``; what version 1 did not record stays null."""
    return _with_columns(table, _V2_COLUMNS, {"status": derived_status(table)})


def _v2_to_v3(table: "pa.Table") -> "pa.Table":
    """Version 3 adds ``worst`` (a failed comparison's worst elements); older records have none."""
    return _with_columns(table, _V3_COLUMNS)


def _v3_to_v4(table: "pa.Table") -> "pa.Table":
    """Version 4 adds raw values, ULPs and the resolved tolerance. The raw rel_mse follows from
    ``sqnr_db`` (the same two sums without the eps rule: ``10^(-sqnr_db / 20)``), and so does
    whether the eps rule zeroed a judged rel_mse; older records have no ULPs, no tolerance
    and no waiver reason or expiry."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mluverify.judge import raw_rel_mse_from_sqnr_db

    sqnr_db = table["sqnr_db"].to_numpy()  # nulls as NaN, which stay NaN: null again below
    raw = pa.array(raw_rel_mse_from_sqnr_db(sqnr_db), from_pandas=True)
    zeroed = pc.and_(pc.and_(pc.equal(table["metric"], "rel_mse"), pc.equal(table["value"], 0.0)),
                     pc.greater(raw, 0.0))
    eps_zeroed = pc.if_else(pc.equal(table["metric"], "rel_mse"), pc.fill_null(zeroed, False), None)
    return _with_columns(table, _V4_COLUMNS, {"raw_rel_mse": raw, "eps_zeroed": eps_zeroed})


def _v4_to_v5(table: "pa.Table") -> "pa.Table":
    """Version 5 adds the task metric columns; older records declared no task metric."""
    return _with_columns(table, _V5_COLUMNS)


# version v -> function turning a v table into a v + 1 table, so every older file still loads.
MIGRATIONS: dict[int, Callable[["pa.Table"], "pa.Table"]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4,
                                                             4: _v4_to_v5}


def records_path(run: Path) -> Path:
    """The records file of ``run``: a run directory or a ``.parquet`` file itself."""
    run = Path(run)
    if run.is_dir():
        path = run / RECORDS_FILE
        if path.exists():
            return path
        if any((run / SHARD_DIR).glob("records-*.jsonl")):
            raise RecordsError(
                f"{run} has unmerged shards but no {RECORDS_FILE}; merge them with "
                f"`mluverify report --merge {run}`"
            )
        raise RecordsError(f"{path} does not exist: {run} is not a mluverify run directory")
    if run.exists():
        return run
    raise RecordsError(f"run {run} does not exist (expected a run directory or a {RECORDS_FILE})")


def load(run: Path) -> "pd.DataFrame":
    """Every record of ``run`` (a run directory or a records parquet file), one row per comparison.

    Raises RecordsError naming the file when it is missing, corrupt, not mluverify records, or
    of a schema version this mluverify can neither read nor migrate. An empty run loads as an
    empty frame with every column; the gate decides what emptiness means.
    """
    path = records_path(run)
    table = migrate(read_table(path), path).select(list(COLUMNS))
    return with_status(table).to_pandas()


def with_status(table: "pa.Table") -> "pa.Table":
    """``table`` with every null ``status`` derived from ``passed`` / ``waived`` / ``error``."""
    import pyarrow.compute as pc

    if table["status"].null_count == 0:
        return table
    status = pc.coalesce(table["status"], derived_status(table))
    return table.set_column(table.schema.get_field_index("status"), "status", status)


def read_table(path: Path) -> "pa.Table":
    """The raw arrow table of ``path``; unreadable parquet becomes a RecordsError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise RecordsError(f"{path} is not a readable parquet file: {exc}") from None


def schema_version(table: "pa.Table", path: Path) -> int:
    """The records schema version stored in ``table``'s metadata.

    Files merged without run metadata carry none; they are taken as the current version when
    they hold every current column, and as foreign otherwise.
    """
    raw = (table.schema.metadata or {}).get(b"mluverify")
    if raw is None:
        missing = [name for name in COLUMNS if name not in table.column_names]
        if missing:
            raise RecordsError(
                f"{path} is not a mluverify records file: no 'mluverify' schema metadata and "
                f"missing columns {missing}"
            )
        return SCHEMA_VERSION
    try:
        return int(json.loads(raw)["schema_version"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordsError(f"{path} has corrupt mluverify metadata ({exc!r}): {raw[:200]!r}") from None


def migrate(table: "pa.Table", path: Path) -> "pa.Table":
    """``table`` brought to ``SCHEMA_VERSION`` through ``MIGRATIONS``, or a RecordsError."""
    version = schema_version(table, path)
    if version > SCHEMA_VERSION:
        raise RecordsError(
            f"{path} holds records schema version {version}, newer than version {SCHEMA_VERSION} "
            f"that this mluverify reads; upgrade mluverify to read it"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise RecordsError(
                f"{path} holds records schema version {version}; this mluverify reads version "
                f"{SCHEMA_VERSION} and has no migration from version {version}"
            )
        table, version = step(table), version + 1
    missing = [name for name in COLUMNS if name not in table.column_names]
    if missing:
        raise RecordsError(f"{path} claims records schema version {version} but lacks columns {missing}")
    return table
