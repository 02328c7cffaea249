"""The cases file of a capture: one parquet row per unique op case, plus the values sidecar.

A cases directory holds ``cases.parquet`` and, when some inputs were kept, ``values.bin``
(the Dumper's binary sidecar: raw values in logical order, located by ``offset`` /
``nbytes``). The parquet's key-value metadata ``mluverify.cases`` (JSON) says the format and
its version, the model, the torch version, whether the capture completed and, if the program
raised, the error, and ``left_out``: the calls kept out of the cases as provenance (device
moves, host reads, mluverify's own ops), counted by op. Readers refuse any other version,
naming the file and both versions.

Schema version 1, one row per unique case (an op and its normalised arguments):

==============  ==================================================================================
column          meaning
==============  ==================================================================================
case            1, 2, ... in order of first occurrence
name            ``{op}-{k}``: the k-th case of that op in this file (``convolution-3``)
model           the captured model (``resnet50``)
op              ATen overload (``aten::convolution``, ``aten::add.Tensor``)
count           how many times the program ran this op with these arguments
first_seq       position of the first occurrence among all captured ops (1-based)
backward        whether autograd ran it, in a backward pass (the program ran the others:
                its forward, loss, optimizer step)
call_site       where the first occurrence was called (``torchvision/models/resnet.py:146 in
                forward``); a backward op adds its autograd node (``[ConvolutionBackward0]``)
arguments       the arguments as text, for people (``input=float32[1, 3, 8, 8], stride=[1, 1]``)
call            JSON ``{"args": [...], "kwargs": {...}}``: the call with tensors as
                ``{"tensor": i}``, see ``encode_value``
tensors         one struct per tensor argument, in ``call`` order: ``arg``, ``dtype``, ``shape``,
                ``stride``, ``source`` (``values``: real values in the sidecar at ``offset`` /
                ``nbytes``; ``recipe``: synthesised from ``min``, ``max``, ``mean``, ``std``
                of the finite values and ``nan_share``, ``posinf_share``, ``neginf_share``;
                ``empty``: no elements)
input_bytes     bytes of the case's tensor arguments
==============  ==================================================================================
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from mluverify.errors import RecordsError

CASES_FILE = "cases.parquet"
FORMAT = "mluverify-cases"
VERSION = 1
META_KEY = b"mluverify.cases"

_TENSOR = pa.struct([
    ("arg", pa.string()), ("dtype", pa.string()), ("shape", pa.list_(pa.int64())),
    ("stride", pa.list_(pa.int64())), ("source", pa.string()), ("offset", pa.int64()),
    ("nbytes", pa.int64()), ("min", pa.float64()), ("max", pa.float64()),
    ("mean", pa.float64()), ("std", pa.float64()), ("nan_share", pa.float64()),
    ("posinf_share", pa.float64()), ("neginf_share", pa.float64()),
])
SCHEMA = pa.schema([
    ("case", pa.int64()), ("name", pa.string()), ("model", pa.string()), ("op", pa.string()),
    ("count", pa.int64()), ("first_seq", pa.int64()), ("backward", pa.bool_()),
    ("call_site", pa.string()), ("arguments", pa.string()), ("call", pa.string()),
    ("tensors", pa.list_(_TENSOR)), ("input_bytes", pa.int64()),
])
TENSOR_FIELDS = tuple(_TENSOR.names)


@dataclass(frozen=True)
class CasesMeta:
    """What a cases file says about its capture."""

    model: str
    torch: str
    complete: bool = True
    error: str = ""  # the exception that ended the captured program early
    max_bytes: int | None = None
    ops: int = 0  # ops captured, repeats included
    left_out: dict[str, int] = field(default_factory=dict)  # op -> calls kept out as provenance


def write_cases(directory: Path, rows: list[dict[str, Any]], meta: CasesMeta) -> Path:
    """Write ``cases.parquet`` (rows as ``SCHEMA``) into ``directory``; returns its path."""
    header = {"format": FORMAT, "version": VERSION, **meta.__dict__}
    table = pa.Table.from_pylist(rows, schema=SCHEMA).replace_schema_metadata(
        {META_KEY: json.dumps(header).encode()})
    path = directory / CASES_FILE
    pq.write_table(table, path)
    return path


def cases_path(path: str | os.PathLike[str]) -> Path:
    """``cases.parquet`` of a cases directory (or the file itself)."""
    path = Path(path)
    return path / CASES_FILE if path.is_dir() else path


def read_cases(path: str | os.PathLike[str]) -> tuple[CasesMeta, list[dict[str, Any]]]:
    """The metadata and rows of a cases file (a directory or its ``cases.parquet``).

    Raises RecordsError naming the file when it is missing, corrupt, not a cases file, or of
    another schema version (both versions named).
    """
    file = cases_path(path)
    if not file.is_file():
        raise RecordsError(f"{file}: no such cases file (made by `mluverify capture`)")
    try:
        table = pq.read_table(file)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise RecordsError(f"{file}: corrupt cases file ({exc})") from None
    header = _header(file, table.schema.metadata or {})
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise RecordsError(f"{file}: cases file (version {VERSION}) lacks columns "
                           f"{', '.join(missing)}")
    meta = CasesMeta(**{key: header[key] for key in CasesMeta.__dataclass_fields__
                        if key in header})
    return meta, table.to_pylist()


def _header(file: Path, metadata: dict[bytes, bytes]) -> dict[str, Any]:
    if META_KEY not in metadata:
        raise RecordsError(f"{file}: not a mluverify cases file (no {META_KEY.decode()} "
                           f"metadata)")
    try:
        header = json.loads(metadata[META_KEY])
    except ValueError as exc:
        raise RecordsError(f"{file}: corrupt {META_KEY.decode()} metadata ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordsError(f"{file}: not a mluverify cases file (format "
                           f"{header.get('format') if isinstance(header, dict) else header!r})")
    if header.get("version") != VERSION:
        raise RecordsError(f"{file}: cases schema version {header.get('version')!r}; this "
                           f"mluverify reads version {VERSION} (capture the model again with "
                           f"this version, or use the mluverify that wrote it)")
    return header


# --- the ``call`` column: a call's arguments as JSON -----------------------------------------

def encode_value(value: Any, tensor_index: Callable[[Any], int]) -> Any:
    """``value`` (an aten argument) as JSON data; tensors become ``{"tensor": i}``.

    Numbers, strings, None and lists stay themselves; non-finite floats
    ``{"float": "nan"|"inf"|"-inf"}``, complex ``{"complex": [re, im]}``; torch dtypes,
    devices, layouts, memory formats ``{"dtype": "float32"}``, ``{"device": "cpu"}``, ...;
    anything else ``{"unsupported": "<type>: <repr>"}``, which replay reports as the reason it
    cannot rebuild the case.
    """
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": tensor_index(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode_value(item, tensor_index) for item in value]
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": value.type}
    for kind in ("layout", "memory_format"):
        if isinstance(value, getattr(torch, kind)):
            return {kind: str(value).removeprefix("torch.")}
    return {"unsupported": f"{type(value).__name__}: {value!r}"}


def decode_value(data: Any, tensor: Callable[[int], Any], device: Any) -> Any:
    """The inverse of ``encode_value``: ``tensor(i)`` gives the i-th tensor, and every device
    becomes ``device`` (a replayed op runs where its inputs are). RecordsError names a value
    that cannot be rebuilt."""
    import torch

    if isinstance(data, list):
        return [decode_value(item, tensor, device) for item in data]
    if not isinstance(data, dict):
        return data
    (kind, value), = data.items()
    if kind == "tensor":
        return tensor(value)
    if kind == "float":
        return float(value)
    if kind == "complex":
        return complex(*value)
    if kind == "device":
        return device
    if kind in ("dtype", "layout", "memory_format"):
        return getattr(torch, value)
    raise RecordsError(f"an argument cannot be rebuilt ({kind}: {value})")
