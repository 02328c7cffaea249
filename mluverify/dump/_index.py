"""The dump's index: one row per dumped tensor, kept crash-safe as the run goes.

Each row names its op (sequence number, ``aten::`` name, directory, parent call) and the op's
other arguments and results as text (``non_tensors``: ``mlu_stride=[1, 1], mlu_groups=1``):
about half of an op's values are not tensors, and a row each would cost as much as a
tensor's row with no number in it to analyse.

While dumping, each op is appended to the journal ``index.journal`` as one length-prefixed
pickle frame as soon as it finishes (a crash or a full disk loses at most the op being
written; pickle because JSON's float printing costs 10x more per op). A frame is
``(op, tensors, errors)``: ``op`` holds the op's columns (``OP_COLUMNS``), each of
``tensors`` the rest of ``COLUMNS`` for one of its tensors: tuples rather than dicts or whole
rows, which are slower to build and to pickle per op (benchmarks/dump_overhead.py, index level
0, is the figure this keeps low); ``errors`` (``use_cpu``: metrics of the op's own, inherited
and total error, or None) belong to the op's first result row. The C++ index core (_core.cpp)
writes the same frames. On exit the journal becomes ``index.parquet``, and then it is removed.
Journals are read back with an unpickler that refuses every global, so a foreign journal
cannot run code. ``load`` reads the journal while there is one, else the parquet. Exact
values of level-2 tensors live in the binary sidecar ``values.bin`` (``offset``/``nbytes``
columns).
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

from mluverify.dump._summary import TENSOR_COLUMNS
from mluverify.errors import RecordsError

META = "dump.json"
JOURNAL = "index.journal"
INDEX = "index.parquet"
SIDECAR = "values.bin"
FORMAT = "mluverify-dump/1"

# Columns every index has, in frame order; metric columns are added when the dump ran with
# use_cpu.
OP_COLUMNS = ("seq", "op", "name", "path", "parent", "non_tensors")
COLUMNS = (*OP_COLUMNS, "arg", "role", "file", *TENSOR_COLUMNS, "degraded", "offset", "nbytes")
_ROLE = COLUMNS.index("role") - len(OP_COLUMNS)  # in a frame's tensor tuple
_LENGTH = struct.Struct("<Q")  # the byte length before each journal frame

# The type of each of the COLUMNS in index.parquet, whatever the level (an all-empty column
# keeps its type).
_COLUMN_TYPES = {
    **dict.fromkeys(("seq", "numel", "level", "nan", "inf", "offset", "nbytes"), pa.int64()),
    **dict.fromkeys(("op", "name", "path", "parent", "non_tensors", "arg", "role", "file",
                     "dtype"), pa.string()),
    **dict.fromkeys(("shape", "stride"), pa.list_(pa.int64())),
    "head": pa.list_(pa.float64()),
    **dict.fromkeys(("min", "max", "mean", "abs_sum"), pa.float64()),
    "degraded": pa.bool_(),
}
# Integer columns that some rows leave empty (statistics below level 1, sidecar below
# level 2): nullable, not float, when loaded.
_INTEGER_COLUMNS = tuple(name for name, kind in _COLUMN_TYPES.items() if kind == pa.int64())


class IndexJournal:
    """Appends op frames to the journal, one write per op."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        # Unbuffered: each op's frame is one write(2), in the OS as soon as it returns.
        self._file: IO[bytes] = open(directory / JOURNAL, "ab", buffering=0)

    def fileno(self) -> int:
        """The journal's descriptor, for the C++ index core's writes (_core.cpp)."""
        return self._file.fileno()

    def append(self, frame: tuple) -> None:
        """Write one op's frame (raises OSError on a full disk)."""
        data = pickle.dumps(frame, protocol=5)
        data = _LENGTH.pack(len(data)) + data
        if self._file.write(data) != len(data):  # a short write: the disk is full
            raise OSError(errno.ENOSPC, "short write to the index journal")

    def close(self, to_parquet: bool = True) -> None:
        """Close the journal and, if asked, write ``index.parquet`` from it and remove it."""
        self._file.close()
        if to_parquet:
            frames = journal_frames(self._directory / JOURNAL)
            sink = pa.BufferOutputStream()
            # A small file read whole: dictionaries and statistics would only cost time.
            pq.write_table(index_table(frame_columns(frames)), sink, use_dictionary=False,
                           write_statistics=False)
            # The journal goes only once the index is whole: ``load`` reads the journal while
            # it is there (a rename would cost another file-system operation per dump).
            (self._directory / INDEX).write_bytes(sink.getvalue())
            os.remove(self._directory / JOURNAL)


def index_table(columns: dict[str, list]) -> pa.Table:
    """The index columns as an Arrow table: the ``COLUMNS`` with their fixed types (the same
    schema at every level, and no type inference); metric columns (``use_cpu``) with inferred
    types."""
    return pa.Table.from_arrays(
        [pa.array(values, type=_COLUMN_TYPES.get(name)) for name, values in columns.items()],
        names=list(columns))


def frame_columns(frames: list[tuple]) -> dict[str, list]:
    """The index columns of op frames."""
    rows = [(*op, *tensor) for op, tensors, _ in frames for tensor in tensors]
    if not rows:
        return {name: [] for name in COLUMNS}
    columns = {name: list(values) for name, values in zip(COLUMNS, zip(*rows))}
    _add_errors(columns, frames)
    return columns


def _add_errors(columns: dict[str, list], frames: list[tuple]) -> None:
    """Put each op's ``errors`` on its first result row (columns made as they first occur)."""
    row = 0
    for _, tensors, errors in frames:
        result = next((i for i, values in enumerate(tensors) if values[_ROLE] == "result"), None)
        if errors and result is not None:  # a foreign frame may have errors but no result
            for name, value in errors.items():
                columns.setdefault(name, [None] * len(columns["seq"]))[row + result] = value
        row += len(tensors)


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (dicts, lists, strings, numbers): every global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} is not index data")


def meta_file(settings: dict[str, Any]) -> tuple[str, bytes]:
    """``dump.json``, which marks a directory as a mluverify dump: (name, contents)."""
    meta = {"format": FORMAT, "settings": settings}
    return META, (json.dumps(meta, indent=1) + "\n").encode()


def load(dump_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """The index of a dump as a DataFrame, one row per dumped tensor.

    Reads ``index.parquet``, or the journal of a run that did not finish (also one that died
    while writing ``index.parquet``: the journal is removed only after it). Raises
    RecordsError naming the file when the directory is not a readable mluverify dump.
    """
    directory = Path(dump_dir)
    _check_meta(directory)
    if (directory / JOURNAL).exists():
        frame = _read_journal(directory / JOURNAL)
    elif (directory / INDEX).exists():
        frame = _read_parquet(directory / INDEX)
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
    """The journal's rows; a torn last frame (the run died mid-write) is left out."""
    return pd.DataFrame(frame_columns(journal_frames(path)))


def journal_frames(path: Path) -> list[tuple]:
    """The journal's op frames; a torn last frame (the run died mid-write) is left out."""
    data = path.read_bytes()
    frames: list[tuple] = []
    offset = 0
    while offset + _LENGTH.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        start, offset = offset + _LENGTH.size, offset + _LENGTH.size + length
        if offset > len(data):  # a torn last frame
            break
        frames.append(_frame(path, data[start:offset], start))
    return frames


def _frame(path: Path, data: bytes, start: int) -> tuple:
    try:
        frame = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # unpickling garbage raises many types
        raise RecordsError(f"{path}: corrupt index frame at byte {start} ({exc})") from None
    if not _is_frame(frame):
        raise RecordsError(f"{path}: index frame at byte {start} is not a mluverify op frame")
    return frame


def _is_frame(frame: Any) -> bool:
    if not (isinstance(frame, tuple) and len(frame) == 3):
        return False
    op, tensors, errors = frame
    return (isinstance(op, tuple) and len(op) == len(OP_COLUMNS) and isinstance(tensors, list)
            and all(isinstance(tensor, tuple) and len(tensor) == len(COLUMNS) - len(OP_COLUMNS)
                    for tensor in tensors)
            and (errors is None or isinstance(errors, dict)))
