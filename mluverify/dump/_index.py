"""The dump's index: one row per dumped tensor, kept crash-safe as the run goes.

While dumping, each op's rows are appended to the journal ``index.journal`` as one
length-prefixed pickle frame (one write and flush per op, so a crash or a full disk loses at
most the op being written; pickle because JSON's float printing costs 10x more per op). On
exit the rows, also kept in memory, become ``index.parquet`` and the journal is removed.
Journals are read back with an unpickler that refuses every global, so a foreign journal
cannot run code. ``load`` reads whichever is there. Exact values of level-2
tensors live in the binary sidecar ``values.bin`` (``offset``/``nbytes`` columns).
"""
from __future__ import annotations

import errno
import io
import json
import os
import pickle
import struct
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mluverify.errors import RecordsError

META = "dump.json"
JOURNAL = "index.journal"
INDEX = "index.parquet"
SIDECAR = "values.bin"
FORMAT = "mluverify-dump/1"

# Columns every index has; metric columns are added when the dump ran with use_cpu.
COLUMNS = (
    "seq", "op", "name", "path", "parent", "arg", "role", "kind", "file", "dtype", "shape",
    "stride", "numel", "level", "degraded", "min", "max", "mean", "abs_sum", "nan", "inf",
    "head", "offset", "nbytes",
)
_LENGTH = struct.Struct("<Q")  # the byte length before each journal frame

# Integer columns that non-tensor rows leave empty: nullable, not float.
_INTEGER_COLUMNS = ("seq", "numel", "level", "nan", "inf", "offset", "nbytes")


class IndexJournal:
    """Appends index rows to the journal, one flushed write per op."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        # Unbuffered: each op's frame is one write(2), in the OS as soon as it returns.
        self._file: IO[bytes] = open(directory / JOURNAL, "ab", buffering=0)
        self._rows: list[dict[str, Any]] = []

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` and flush them to the OS (raises OSError on a full disk)."""
        if rows:
            frame = pickle.dumps(rows, protocol=5)
            data = _LENGTH.pack(len(frame)) + frame
            if self._file.write(data) != len(data):  # a short write: the disk is full
                raise OSError(errno.ENOSPC, "short write to the index journal")
            self._rows += rows

    def close(self, to_parquet: bool = True) -> None:
        """Close the journal and, if asked, write ``index.parquet`` and remove the journal."""
        self._file.close()
        if to_parquet:
            columns = dict.fromkeys([*COLUMNS, *(key for row in self._rows for key in row)])
            table = pa.Table.from_pydict({key: [row.get(key) for row in self._rows]
                                          for key in columns})
            pq.write_table(table, self._directory / INDEX)
            os.remove(self._directory / JOURNAL)


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (dicts, lists, strings, numbers): every global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} is not index data")


def write_meta(directory: Path, settings: dict[str, Any]) -> None:
    """Write ``dump.json``, which marks ``directory`` as a mluverify dump."""
    meta = {"format": FORMAT, "settings": settings}
    (directory / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def load(dump_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """The index of a dump as a DataFrame, one row per dumped tensor.

    Reads ``index.parquet``, or the journal of a run that did not finish. Raises
    RecordsError naming the file when the directory is not a readable mluverify dump.
    """
    directory = Path(dump_dir)
    _check_meta(directory)
    if (directory / INDEX).exists():
        frame = _read_parquet(directory / INDEX)
    elif (directory / JOURNAL).exists():
        frame = _read_journal(directory / JOURNAL)
    else:
        raise RecordsError(f"{directory}: no {INDEX} or {JOURNAL}; not a mluverify dump "
                           f"(or one that wrote nothing)")
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise RecordsError(f"{directory / INDEX}: not a mluverify dump index "
                           f"(missing columns {', '.join(missing)})")
    return frame.astype({column: "Int64" for column in _INTEGER_COLUMNS})


def load_values(dump_dir: str | os.PathLike[str], row: Any) -> np.ndarray:
    """The exact values of one level-2 index row, from the sidecar, in the row's shape."""
    if pd.isna(row["offset"]):
        raise RecordsError(f"{row['path']}/{row['arg']}: no exact values (dumped at level "
                           f"{row['level']}; only level 2 writes {SIDECAR})")
    dtype = "float32" if row["dtype"] == "bfloat16" else row["dtype"]
    with open(Path(dump_dir) / SIDECAR, "rb") as sidecar:
        sidecar.seek(int(row["offset"]))
        data = sidecar.read(int(row["nbytes"]))
    return np.frombuffer(data, dtype=dtype).reshape(tuple(row["shape"]))


def _check_meta(directory: Path) -> None:
    meta_path = directory / META
    if not directory.is_dir():
        raise RecordsError(f"{directory}: no such dump directory")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordsError(f"{meta_path}: missing; {directory} is not a mluverify dump") from None
    except (OSError, ValueError) as exc:
        raise RecordsError(f"{meta_path}: unreadable ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise RecordsError(f"{meta_path}: not a {FORMAT} dump (format "
                           f"{meta.get('format') if isinstance(meta, dict) else meta!r})")


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise RecordsError(f"{path}: corrupt parquet index ({exc})") from None


def _read_journal(path: Path) -> pd.DataFrame:
    """Rows of the journal; a torn last frame (the run died mid-write) is left out."""
    data = path.read_bytes()
    rows: list[dict[str, Any]] = []
    offset = 0
    while offset + _LENGTH.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        start, offset = offset + _LENGTH.size, offset + _LENGTH.size + length
        if offset > len(data):
            break
        rows += _frame_rows(path, data[start:offset], start)
    return _frame(rows)


def _frame_rows(path: Path, frame: bytes, start: int) -> list[dict[str, Any]]:
    try:
        op_rows = _PlainUnpickler(io.BytesIO(frame)).load()
    except Exception as exc:  # unpickling garbage raises many types
        raise RecordsError(f"{path}: corrupt index frame at byte {start} ({exc})") from None
    if not isinstance(op_rows, list) or not all(isinstance(row, dict) for row in op_rows):
        raise RecordsError(f"{path}: index frame at byte {start} is not a list of rows")
    return op_rows


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    # Levels 0 and 2 leave out statistics or sidecar columns that other rows may have had.
    return frame.reindex(columns=[*COLUMNS, *(c for c in frame.columns if c not in COLUMNS)])
