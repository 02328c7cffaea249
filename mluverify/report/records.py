"""Records: one row per comparison, written as per-process shards and merged into parquet.

A run directory holds ``shards/records-<worker>-<pid>.jsonl`` while it runs (one line per record,
flushed as it is made, so a crash or an interrupt keeps every record already written) and
``records.parquet`` once merged. Merging is atomic (write to a temporary file, then rename) and
can be repeated on an interrupted run: ``mluverify report --merge DIR``. ``merge_runs`` joins the
runs that several machines made of one suite (``mluverify report --merge RUN... --out DIR``).
"""
from __future__ import annotations

import io
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from mluverify.errors import RecordsError

SCHEMA_VERSION = 3

# column -> pyarrow type factory name (pyarrow.<name>()); the single definition of a record.
COLUMNS: dict[str, str] = {
    "run_id": "string",
    "case_id": "string",
    "suite": "string",
    "op": "string",
    "target": "string",
    "backend": "string",
    "mode": "string",
    "dtype": "string",
    "quant": "string",
    "shape": "string",
    "metric": "string",
    "value": "float64",
    "bound": "float64",
    "passed": "bool_",
    "headroom": "float64",
    "rel_mse": "float64",
    "rae": "float64",
    "rma": "float64",
    "max_abs": "float64",
    "max_rel": "float64",
    "cosine": "float64",
    "sqnr_db": "float64",
    "extra_metrics": "string",
    "nan_mismatch": "int64",
    "fallback_ops": "string",
    "seed": "int64",
    "reproducer": "string",
    "duration_s": "float64",
    "reason": "string",
    "error": "string",
    "waived": "bool_",
    # --- schema version 2: status and provenance (how the case really ran) ---
    "status": "string",            # passed | failed | errored | waived | not_on_device | not_fused | nondeterministic
    "kind": "string",              # what was compared: "output", or "grad" for a gradient
    "leaf": "string",              # the output (or gradient) leaf a record judges, "" for a single tensor
    "executed_as": "string",       # device | fused | partially fused | layer-by-layer
    "op_on_cpu": "bool_",          # the op under test itself ran as a CPU fallback
    "not_fused_reason": "string",  # why a fused target ran (partly) layer by layer
    "device_impl": "string",       # which implementation ran: "emulator", "torch_mlu", "cuda", ...
    "core_version": "string",
    "core_number": "int64",
    "device_error": "float64",     # golden reference: the device's error against float64 (judged metric)
    "reference_error": "float64",  # golden reference: the CPU float32 result's own error against float64
    "error_ratio": "float64",      # device_error / reference_error
    "compile_s": "float64",        # compiled targets: time spent compiling (not in duration_s)
    "graph_breaks": "int64",
    "recompiles": "int64",
    "model": "string",             # captured cases: the model and the call site they came from
    "call_site": "string",
    # --- schema version 3 ---
    "worst": "string",             # the worst elements of a failed comparison: "index: actual vs expected; ..."
}
# Columns a back end may fill through ``Execution.info`` (see mluverify.core.backends).
PROVENANCE_COLUMNS = ("device_impl", "core_version", "core_number", "compile_s", "graph_breaks", "recompiles")

SHARD_DIR = "shards"
RECORDS_FILE = "records.parquet"
META_FILE = "run.json"
SELECTED_FILE = "selected.txt"


def run_metadata(run_id: str) -> dict[str, Any]:
    """Versions, host, command line, start time and git revision of a run (stored beside its
    records)."""
    from mluverify import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "mluverify_version": __version__,
        "torch_version": _torch_version(),
        "python_version": platform.python_version(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": shlex.join(sys.argv),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_revision": _git_revision(),
    }


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # torch is a dependency, but metadata may be absent in odd installs
        return ""


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    """Fill missing columns with None and refuse columns the schema does not know."""
    unknown = set(record) - set(COLUMNS)
    if unknown:
        raise RecordsError(f"record has columns the schema does not know: {sorted(unknown)}")
    return {name: record.get(name) for name in COLUMNS}


class ShardWriter:
    """Appends records of one process to its own JSON-lines shard, one line per system call.

    The shard only ever holds whole lines: a write the disk (or a file-size limit) cuts short is
    cut back to the last whole line, so later records never follow a torn one.
    """

    def __init__(self, run_dir: Path, worker: str = "main") -> None:
        self.path = Path(run_dir) / SHARD_DIR / f"records-{worker}-{os.getpid()}.jsonl"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab", buffering=0)
        except OSError as exc:
            raise RecordsError(f"cannot write records to {self.path.parent}: {exc.strerror}") from None
        self._whole = self._file.seek(0, os.SEEK_END)  # bytes of whole lines

    def write(self, record: dict[str, Any]) -> None:
        line = memoryview((json.dumps(normalize(record), allow_nan=True) + "\n").encode("utf-8"))
        try:
            while line:
                line = line[self._file.write(line):]
        except OSError as exc:
            os.ftruncate(self._file.fileno(), self._whole)
            raise RecordsError(
                f"cannot append to {self.path} ({exc.strerror}); records written before are kept"
            ) from None
        self._whole = self._file.tell()

    def close(self) -> None:
        self._file.close()


def read_shards(run_dir: Path):
    """Every complete record in a run's shards as a pyarrow Table with the records schema.

    A torn last line (the process died mid-write) is dropped; every line before it is kept.
    """
    import pyarrow as pa
    import pyarrow.json as pa_json

    schema = arrow_schema()
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    tables = [schema.empty_table()]
    for shard in sorted((Path(run_dir) / SHARD_DIR).glob("records-*.jsonl")):
        data = shard.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if complete:
            try:
                tables.append(pa_json.read_json(io.BytesIO(complete), parse_options=options))
            except pa.ArrowInvalid as exc:
                raise RecordsError(f"records shard {shard} is corrupt: {exc}") from None
    return pa.concat_tables(tables)


def arrow_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in COLUMNS.items()])


def to_table(rows: Iterable[dict[str, Any]], metadata: dict[str, Any] | None = None):
    """Records (dicts) as a pyarrow Table with the records schema and the run metadata attached."""
    import pyarrow as pa

    table = pa.Table.from_pylist([normalize(r) for r in rows], schema=arrow_schema())
    return with_metadata(table, metadata)


def with_metadata(table, metadata: dict[str, Any] | None):
    """``table`` carrying the run metadata in its schema (key ``mluverify``)."""
    return table.replace_schema_metadata({"mluverify": json.dumps(metadata)}) if metadata else table


def merge(run_dir: Path) -> Path:
    """Merge the shards of ``run_dir`` (with any earlier merged records) into ``records.parquet``.

    Atomic: readers see the old file or the new one, never half of one. Shards are kept until
    the new file is in place, then removed, so an interrupted merge can simply be run again.
    """
    import pyarrow as pa

    run_dir = check_run_dir(run_dir)
    shards = sorted((run_dir / SHARD_DIR).glob("records-*.jsonl"))
    table = pa.concat_tables([*_merged_records(run_dir), read_shards(run_dir)])
    target = write_records(run_dir, table, read_metadata(run_dir))
    for shard in shards:
        shard.unlink()
    return target


def check_run_dir(run_dir: Path) -> Path:
    """``run_dir`` if it is a mluverify run directory (run metadata, records or shards), else a
    RecordsError saying what it is."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise RecordsError(f"run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise RecordsError(f"{run_dir} is not a run directory (a run is a directory holding {META_FILE} "
                           f"and {RECORDS_FILE})")
    if not any((run_dir / name).exists() for name in (META_FILE, RECORDS_FILE, SHARD_DIR)):
        raise RecordsError(f"{run_dir} is not a mluverify run directory: it holds no {META_FILE}, "
                           f"{RECORDS_FILE} or {SHARD_DIR}/")
    return run_dir


def _merged_records(run_dir: Path) -> list:
    """The records already merged into ``run_dir`` (none or one table, current schema, no
    metadata); a truncated or foreign file is a RecordsError naming it."""
    from mluverify.report.loading import migrate, read_table

    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return []
    table = migrate(read_table(path), path)
    return [table.select(list(COLUMNS)).cast(arrow_schema()).replace_schema_metadata(None)]


def write_records(run_dir: Path, table, metadata: dict[str, Any]) -> Path:
    """Write ``table`` as the run's ``records.parquet`` atomically (a temporary file, then a
    rename); a failure (e.g. a full disk) leaves the previous file and names the culprit."""
    import pyarrow.parquet as pq

    target = Path(run_dir) / RECORDS_FILE
    tmp = target.with_suffix(f".tmp-{os.getpid()}")
    try:
        pq.write_table(with_metadata(table, metadata), tmp)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordsError(f"cannot write {target}: {exc.strerror or exc}; nothing already written "
                           f"was changed") from None
    return target


def write_metadata(run_dir: Path, metadata: dict[str, Any]) -> None:
    """Write ``run.json`` atomically; a failure names the file."""
    path = Path(run_dir) / META_FILE
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(metadata, indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordsError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_metadata(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / META_FILE
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RecordsError(f"run metadata {path} is corrupt: {exc}") from None


def write_selected(run_dir: Path, test_ids: Iterable[str]) -> None:
    """Keep the ids of the tests the run selected (after -k, -m, deselection and slicing), so
    the gate counts a baseline case as missing only when its test was selected."""
    path = Path(run_dir) / SELECTED_FILE
    try:
        path.write_text("".join(f"{test_id}\n" for test_id in test_ids), encoding="utf-8")
    except OSError as exc:
        raise RecordsError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_selected(run_dir: Path) -> list[str] | None:
    """The selected test ids of a run, or None when it did not keep them (every case counts)."""
    path = Path(run_dir) / SELECTED_FILE
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else None


# Slices of one run must come from the same software: records of different versions are not
# one run.
MERGE_SAME_KEYS = ("mluverify_version", "torch_version", "git_revision")


def merge_runs(sources: Iterable[Path], into: Path) -> Path:
    """Merge run directories (e.g. the slices CI ran on several machines) into the run directory
    ``into``: their records (merged or still in shards) and metadata naming each source. The
    sources are only read. The merged run is gated as a whole (no selection is kept): a slice
    that did not make it into the merge shows as missing cases, not as a smaller suite.

    Refuses (RecordsError) runs of different versions (``MERGE_SAME_KEYS``) and a case id found
    in more than one run, naming them.
    """
    import pyarrow as pa

    runs = [check_run_dir(source) for source in sources]
    metadata = [read_metadata(run) for run in runs]
    _check_same_versions(runs, metadata)
    tables = [pa.concat_tables([*_merged_records(run), read_shards(run)]) for run in runs]
    _check_disjoint(runs, tables)
    merged_metadata = _merged_metadata(runs, metadata)
    write_metadata(into, merged_metadata)
    return write_records(into, pa.concat_tables(tables), merged_metadata)


def _check_same_versions(runs: list[Path], metadata: list[dict[str, Any]]) -> None:
    for key in MERGE_SAME_KEYS:
        values = {meta.get(key, "") for meta in metadata}
        if len(values) > 1:
            listed = ", ".join(f"{run}: {meta.get(key, '') or '(unknown)'}" for run, meta in zip(runs, metadata))
            raise RecordsError(f"cannot merge runs of different {key} ({listed}); merge only slices of "
                               f"one run, made from the same revision and environment")


def _check_disjoint(runs: list[Path], tables: list) -> None:
    """Each case belongs to one slice: a case id in two runs means overlapping slices (or a
    run given twice)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    uniques = [pc.unique(table["case_id"]) for table in tables]
    counts = pc.value_counts(pa.concat_arrays(uniques)) if uniques else None
    duplicated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(duplicated) == 0:
        return
    example = duplicated[0].as_py()
    holders = [str(run) for run, ids in zip(runs, uniques) if pc.any(pc.equal(ids, example)).as_py()]
    raise RecordsError(f"cannot merge: {len(duplicated)} case id(s) are in more than one run, e.g. "
                       f"{example!r} in {' and '.join(holders)}; the runs overlap (or one was given twice)")


def _merged_metadata(runs: list[Path], metadata: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged run's metadata: the shared versions, a new run id, the earliest start, and
    where each part came from."""
    import uuid

    first = {key: value for key, value in metadata[0].items() if key not in ("finished", "baseline")}
    starts = [meta["started"] for meta in metadata if meta.get("started")]
    return {
        **first,
        "schema_version": SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex[:12],
        "host": ", ".join(sorted({meta.get("host", "") for meta in metadata} - {""})),
        "command": shlex.join(sys.argv),
        "started": min(starts) if starts else first.get("started", ""),
        "merged_from": [{"run_dir": str(run), "run_id": meta.get("run_id", ""), "host": meta.get("host", "")}
                        for run, meta in zip(runs, metadata)],
    }
