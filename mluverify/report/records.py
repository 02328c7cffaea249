"""Records: one row per comparison, written as per-process shards and merged into parquet.

A run directory holds ``shards/records-<worker>-<pid>.jsonl`` while it runs (one line per record,
flushed as it is made, so a crash or an interrupt keeps every record already written) and
``records.parquet`` once merged (``mluverify.report.merging``, which reads the merged records
back through ``mluverify.report.loading``: this module defines the record and writes it, and
imports neither).
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from mluverify.core.record import COLUMN_TYPES, PROVENANCE_COLUMNS, Record
from mluverify.errors import RecordsError

SCHEMA_VERSION = 5

# column -> pyarrow type factory name (pyarrow.<name>()): the fields of the typed record.
COLUMNS: dict[str, str] = COLUMN_TYPES

SHARD_DIR = "shards"
RECORDS_FILE = "records.parquet"
META_FILE = "run.json"
SELECTED_FILE = "selected.txt"
# run.json: each shard line that was no record (``<shard> line <n>: <why>``), kept by every merge.
CORRUPT_KEY = "corrupt_records"


def run_metadata(run_id: str) -> dict[str, Any]:
    """Versions, host, command line, start time and git revision of a run (stored beside its
    records)."""
    from mluverify._version import __version__

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


def normalize(record: Record | dict[str, Any]) -> dict[str, Any]:
    """A record as a row: a ``Record``'s fields; a dict's columns with the missing ones None
    (columns the schema does not know are refused)."""
    if isinstance(record, Record):
        return record.as_row()
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

    def write(self, record: Record | dict[str, Any]) -> None:
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


@dataclass(frozen=True)
class ShardRecords:
    """What a run's shards hold: ``table``, every valid record (the records schema), and
    ``corrupt``, each whole line that is no record, as ``<shard> line <n>: <why>`` (the shard
    relative to the run directory), in order."""

    table: Any
    corrupt: tuple[str, ...] = ()
    corrupt_shards: tuple[Path, ...] = ()  # the shards holding those lines


def read_shards(run_dir: Path) -> ShardRecords:
    """Every complete record in a run's shards (``ShardRecords``).

    A torn last line (the process died mid-write) is dropped; every line before it is kept. A
    whole line that is no record (a corrupt disk block, a stray write) costs that line only:
    the valid lines around it are kept, and the line is named.
    """
    import pyarrow as pa

    tables, corrupt, corrupt_shards = [arrow_schema().empty_table()], [], []
    for shard in sorted((Path(run_dir) / SHARD_DIR).glob("records-*.jsonl")):
        data = shard.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if not complete:
            continue
        try:
            tables.append(_parse_lines(complete))
        except pa.ArrowInvalid:  # one bad line fails the block: find it, keep the others
            valid, bad = _valid_lines(complete, shard.relative_to(run_dir))
            tables.append(_parse_lines(valid))
            corrupt += bad
            corrupt_shards.append(shard)
    return ShardRecords(pa.concat_tables(tables), tuple(corrupt), tuple(corrupt_shards))


def _parse_lines(data: bytes):
    """JSON lines as a Table with the records schema (pyarrow.ArrowInvalid when one is no record)."""
    import pyarrow.json as pa_json

    if not data:
        return arrow_schema().empty_table()
    options = pa_json.ParseOptions(explicit_schema=arrow_schema(), unexpected_field_behavior="error")
    return pa_json.read_json(io.BytesIO(data), parse_options=options)


def _valid_lines(data: bytes, shard: Path) -> tuple[bytes, list[str]]:
    """The lines of ``data`` that parse as records, and ``<shard> line <n>: <why>`` for the others."""
    import re

    import pyarrow as pa

    valid, bad = [], []
    for number, line in enumerate(data.splitlines(keepends=True), 1):
        if not line.strip():
            continue
        try:
            _parse_lines(line)
            valid.append(line)
        except pa.ArrowInvalid as exc:
            # pyarrow counts rows of the block it was given: here always row 0
            bad.append(f"{shard} line {number}: {re.sub(r' in row [0-9]+$', '', str(exc))}")
    return b"".join(valid), bad


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
    """Keep what the run selected: the ids of the tests it kept (after -k, -m, deselection and
    slicing), or the paths and node ids it was given, so the gate counts a baseline case as
    missing only when it lies in the selection (``mluverify.report.gate.in_selection``)."""
    path = Path(run_dir) / SELECTED_FILE
    try:
        path.write_text("".join(f"{test_id}\n" for test_id in test_ids), encoding="utf-8")
    except OSError as exc:
        raise RecordsError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_selected(run_dir: Path) -> list[str] | None:
    """What a run selected (``write_selected``), or None when it did not say (every case counts)."""
    path = Path(run_dir) / SELECTED_FILE
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else None
