"""The dump's index: one row per dumped tensor, kept crash-safe as the run goes.

Each row names its op (sequence number, ``aten::`` name, directory, parent call) and the op's
other arguments and results as text (``non_tensors``: ``mlu_stride=[1, 1], mlu_groups=1``):
about half of an op's values are not tensors, and a row each would cost as much as a
tensor's row with no number in it to analyse.

While dumping, each op is appended to the journal ``index.journal`` as one length-prefixed
pickle frame as soon as it finishes (a crash or a full disk loses at most the op being
written; pickle because JSON's float printing costs 10x more per op). A frame is ``(rows, errors)``:
rows are tuples in ``COLUMNS`` order, not dicts, which are slower to build and to pickle per
op (benchmarks/dump_overhead.py, index level 0, is the figure this keeps low);
``errors`` (``use_cpu``: metrics of the op's own, inherited and total error, or None) belong
to the op's first result row. On exit the frames, also kept in memory, become
``index.parquet`` and the journal is removed.
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

from mluverify.dump._summary import TENSOR_COLUMNS
from mluverify.errors import RecordsError

META = "dump.json"
JOURNAL = "index.journal"
INDEX = "index.parquet"
SIDECAR = "values.bin"
FORMAT = "mluverify-dump/1"

# Columns every index has, in frame order; metric columns are added when the dump ran with
# use_cpu.
COLUMNS = ("seq", "op", "name", "path", "parent", "non_tensors", "arg", "role", "file",
           *TENSOR_COLUMNS, "degraded", "offset", "nbytes")
_ROLE = COLUMNS.index("role")
_LENGTH = struct.Struct("<Q")  # the byte length before each journal frame

# Integer columns that some rows leave empty (statistics below level 1, sidecar below
# level 2): nullable, not float.
_INTEGER_COLUMNS = ("seq", "numel", "level", "nan", "inf", "offset", "nbytes")


class IndexJournal:
    """Appends op frames to the journal, one write per op."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        # Unbuffered: each op's frame is one write(2), in the OS as soon as it returns.
        self._file: IO[bytes] = open(directory / JOURNAL, "ab", buffering=0)
        self._frames: list[tuple] = []

    def append(self, frame: tuple) -> None:
        """Write one op's frame (raises OSError on a full disk)."""
        data = pickle.dumps(frame, protocol=5)
        data = _LENGTH.pack(len(data)) + data
        if self._file.write(data) != len(data):  # a short write: the disk is full
            raise OSError(errno.ENOSPC, "short write to the index journal")
        self._frames.append(frame)

    def close(self, to_parquet: bool = True) -> None:
        """Close the journal and, if asked, write ``index.parquet`` and remove the journal."""
        self._file.close()
        if to_parquet:
            # A small file read whole: dictionaries and statistics would only cost time.
            pq.write_table(pa.Table.from_pydict(frame_columns(self._frames)),
                           self._directory / INDEX, use_dictionary=False,
                           write_statistics=False)
            os.remove(self._directory / JOURNAL)


def frame_columns(frames: list[tuple]) -> dict[str, list]:
    """The index columns of op frames."""
    rows = [row for frame in frames for row in frame[0]]
    if not rows:
        return {name: [] for name in COLUMNS}
    columns = {name: list(values) for name, values in zip(COLUMNS, zip(*rows))}
    _add_errors(columns, frames)
    return columns


def _add_errors(columns: dict[str, list], frames: list[tuple]) -> None:
    """Put each op's ``errors`` on its first result row (columns made as they first occur)."""
    row = 0
    for rows, errors in frames:
        result = next((i for i, values in enumerate(rows) if values[_ROLE] == "result"), None)
        if errors and result is not None:  # a foreign frame may have errors but no result
            for name, value in errors.items():
                columns.setdefault(name, [None] * len(columns["seq"]))[row + result] = value
        row += len(rows)


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
    """The journal's rows; a torn last frame (the run died mid-write) is left out."""
    data = path.read_bytes()
    frames: list[tuple] = []
    offset = 0
    while offset + _LENGTH.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        start, offset = offset + _LENGTH.size, offset + _LENGTH.size + length
        if offset > len(data):  # a torn last frame
            break
        frames.append(_frame(path, data[start:offset], start))
    return pd.DataFrame(frame_columns(frames))


def _frame(path: Path, data: bytes, start: int) -> tuple:
    try:
        frame = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # unpickling garbage raises many types
        raise RecordsError(f"{path}: corrupt index frame at byte {start} ({exc})") from None
    if not _is_frame(frame):
        raise RecordsError(f"{path}: index frame at byte {start} is not a mluverify op frame")
    return frame


def _is_frame(frame: Any) -> bool:
    return (isinstance(frame, tuple) and len(frame) == 2 and isinstance(frame[0], list)
            and all(isinstance(row, tuple) and len(row) == len(COLUMNS) for row in frame[0])
            and (frame[1] is None or isinstance(frame[1], dict)))
