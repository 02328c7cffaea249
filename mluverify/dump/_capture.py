"""``capture``: every aten op a program runs, deduplicated into cases that can be replayed.

A ``TorchDispatchMode`` sees each aten op (the forward, and the backward when the program
runs one) before it runs, on any device. Ops are deduplicated by op and *normalised*
arguments: each tensor by dtype, shape and strides, every other argument by value. A new case
keeps its first call site and its inputs: the real values while they fit in ``max_bytes``
(the Dumper's binary sidecar), else a recipe to synthesise matching values (min, max, mean
and std of the finite values, NaN / +Inf / -Inf shares). Repeats only count.

Device moves, host reads (``.item()``) and mluverify's own ops are not cases: they are
counted by op in the file's metadata (``left_out``) as the program's provenance.

Inputs are read before the op runs, since in-place ops change them. An unchanged tensor read
by several cases (an op's output and the next op's input) is written to the sidecar once.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.dump._cases import CasesMeta, encode_value, write_cases
from mluverify.dump._dumper import undumped
from mluverify.dump._fused import FusedStats, fused_stats, kernel_available
from mluverify.dump._layout import create_dump_dir, op_info, resolve_dump_dir
from mluverify.dump._summary import _to_numpy, host_view
from mluverify.dump._writer import DumpWriter
from mluverify.errors import InvalidArgument

# The default budget of real input values a capture keeps (the rest become recipes).
DEFAULT_MAX_BYTES = 16 << 20

# Namespaces of ops that compute nothing (``record_function`` markers of the profiler); data
# moves (``copy_``) are left out as in the Dumper (``_layout.EXCLUDED_OPS``).
_BOOKKEEPING = frozenset({"profiler"})
# Calls that are the program's provenance, not op cases (``provenance_kind``): a device move
# has no result to compare on a target (it is the target's way in and out), a host read is
# the CPU's, and a fused engine can never take either.
_MOVES = frozenset({"_to_copy", "to", "copy_", "_copy_from", "_copy_from_and_resize"})
_HOST_READS = frozenset({"_local_scalar_dense", "item"})
_PLAIN = frozenset({int, str, type(None), torch.dtype, torch.device, torch.layout,
                    torch.memory_format})
# torch's and mluverify's folders (this file is mluverify/dump/_capture.py)
_LIBRARIES = tuple(folder + os.sep for folder in (os.path.dirname(torch.__file__),
                                                 os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _normalised(value: Any) -> Any:
    """What makes two calls the same case: tensors by dtype, shape and strides, other values
    by value (and type: ``True`` is not ``1``, ``1.0`` is not ``1``). Hashable."""
    if isinstance(value, torch.Tensor):
        return value.dtype, value.shape, value.stride()
    if isinstance(value, (list, tuple)):
        return tuple(map(_normalised, value))
    if type(value) in _PLAIN:
        return value
    return type(value), repr(value)  # floats (NaN equals NaN by its repr), bools, the rest


def provenance_kind(func: Any, args: tuple, kwargs: dict) -> str | None:
    """Why a call is kept out of the cases, counted as the capture's provenance only:
    ``"mluverify's own op"`` (the harness's ``mluverify_native`` / ``mluverify_dump``
    namespaces; ``mluverify::`` ops such as ``quant_conv`` are a quantized model's, and
    cases), ``"host read"`` (``.item()``), ``"device move"`` (``to`` / ``_to_copy`` / ``copy_``
    between devices); None for an op case (a cast or copy on one device is one)."""
    if func.namespace.startswith("mluverify_"):
        return "mluverify's own op"
    name = func._schema.name.partition("::")[2]
    if name in _HOST_READS:
        return "host read"
    if name in _MOVES and len(_devices([*args, *kwargs.values()])) > 1:
        return "device move"
    return None


def _devices(values: list) -> set[tuple[str, int]]:
    """The devices of the tensors and devices among ``values`` (an index-less device is 0)."""
    found = set()
    for value in values:
        device = value.device if isinstance(value, torch.Tensor) else value
        if isinstance(device, torch.device):
            found.add((device.type, device.index or 0))
    return found


def case_key(func: Any, args: tuple, kwargs: dict) -> tuple:
    """The deduplication key of one aten call."""
    normalised_kwargs = tuple((name, _normalised(kwargs[name])) for name in sorted(kwargs))
    return func, _normalised(args), normalised_kwargs


def call_site(node: Any = None) -> str:
    """``file:line in function`` of the innermost frame outside torch and mluverify (paths
    relative to the working directory or to their ``sys.path`` entry), and the autograd node
    for a backward op (``[ConvolutionBackward0]``; autograd may run it on a thread of its own,
    where no frame of the program is on the stack)."""
    site = program_site(sys._getframe(1))
    return site if node is None else f"{site} [{node.name()}]".lstrip()


def program_site(frame: Any, line: int | None = None) -> str:
    """``file:line in function`` of ``frame`` or the innermost frame outside it that is
    neither torch's nor mluverify's ("" if none is)."""
    while frame is not None and (frame.f_code.co_filename.startswith(_LIBRARIES)
                                 or frame.f_code.co_filename.startswith("<")):
        frame, line = frame.f_back, None
    if frame is None:
        return ""
    return (f"{_short_path(frame.f_code.co_filename)}:{line or frame.f_lineno} in "
            f"{frame.f_code.co_name}")


def _short_path(path: str) -> str:
    """``path`` relative to its installed package's root (``torchvision/models/resnet.py``),
    else to the working directory, else to its ``sys.path`` entry."""
    entries = [os.path.abspath(entry) for entry in sys.path if entry]
    installed = [entry for entry in entries if os.path.basename(entry).endswith("-packages")]
    others = [entry for entry in entries if entry not in installed]
    for roots in (installed, [os.getcwd()], others):
        for root in sorted(roots, key=len, reverse=True):
            root = os.path.join(root, "")
            if path.startswith(root):
                return path[len(root):]
    return path


def describe(tensor: torch.Tensor) -> str:
    """``float32[1, 3, 8, 8]``, and its strides when it is not contiguous."""
    text = f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}"
    return text if tensor.is_contiguous() else f"{text} stride {list(tensor.stride())}"


def recipe(tensor: torch.Tensor) -> dict[str, float]:
    """How to synthesise values like ``tensor``'s: min, max, mean and std of its finite
    values and the shares of NaN, +Inf and -Inf (complex: of its real and imaginary parts)."""
    values = host_view(tensor)
    if values.is_complex():
        values = torch.view_as_real(values)
    if not values.is_floating_point():  # integer and boolean tensors are rare and small
        values = values.double()
    stats = fused_stats(values)
    return _torch_recipe(values) if stats is None else _recipe_of(stats, values.numel())


def _recipe_of(stats: FusedStats, numel: int) -> dict[str, float]:
    finite = numel - stats.nan - stats.posinf - stats.neginf
    shares = dict(nan_share=stats.nan / numel, posinf_share=stats.posinf / numel,
                  neginf_share=stats.neginf / numel)
    if not finite:
        return dict(min=math.nan, max=math.nan, mean=math.nan, std=math.nan, **shares)
    mean = stats.sum / finite
    std = math.sqrt(max(stats.squares / finite - mean * mean, 0.0))
    return dict(min=stats.min, max=stats.max, mean=mean, std=std, **shares)


def _torch_recipe(values: torch.Tensor) -> dict[str, float]:
    """``recipe`` by torch's reductions (where the fused kernel is unavailable)."""
    values = values.float() if values.element_size() < 4 else values
    numel = values.numel()
    finite = values[torch.isfinite(values)]
    shares = dict(nan_share=int(torch.isnan(values).sum()) / numel,
                  posinf_share=int((values == math.inf).sum()) / numel,
                  neginf_share=int((values == -math.inf).sum()) / numel)
    if finite.numel() == 0:
        return dict(min=math.nan, max=math.nan, mean=math.nan, std=math.nan, **shares)
    low, high = (float(bound) for bound in torch.aminmax(finite))
    std, mean = (float(value) for value in torch.std_mean(finite, correction=0))
    return dict(min=low, max=high, mean=mean, std=std, **shares)


@dataclass
class _Case:
    """One unique case while the capture runs (a ``cases.parquet`` row once it ends)."""

    row: dict[str, Any]
    count: int = 1


@dataclass
class _Written:
    """A tensor already in the sidecar, valid while it is unchanged (same object, version)."""

    ref: weakref.ref
    version: int | None
    offset: int
    nbytes: int


class _Recorder:
    """The state of one capture: unique cases, their counts and the values sidecar."""

    def __init__(self, root: Path, model: str, max_bytes: int | None) -> None:
        self.model = model
        self.ops = 0
        self.left_out: dict[str, int] = {}  # op -> calls kept out as provenance
        self._cases: dict[tuple, _Case] = {}
        self._per_op: dict[str, int] = {}
        self._writer = DumpWriter(root, max_bytes)
        self._written: dict[int, _Written] = {}

    @property
    def cases(self) -> int:
        return len(self._cases)

    def record(self, func: Any, args: tuple, kwargs: dict) -> None:
        """Count one call of ``func``; a new case keeps its call site and inputs; provenance
        (``provenance_kind``) is only counted."""
        if provenance_kind(func, args, kwargs) is not None:
            name = str(func.name())
            self.left_out[name] = self.left_out.get(name, 0) + 1
            return
        if op_info(func).excluded:  # a copy on one device: the Dumper's rule
            return
        self.ops += 1
        key = case_key(func, args, kwargs)
        case = self._cases.get(key)
        if case is not None:
            case.count += 1
            return
        with undumped():  # the capture's own tensor work is not the program's
            self._cases[key] = _Case(self._new_case(func, args, kwargs))

    def _new_case(self, func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
        node = torch._C._current_autograd_node()
        info = op_info(func)
        tensors: list[torch.Tensor] = []

        def tensor_index(tensor: torch.Tensor) -> int:
            tensors.append(tensor)
            return len(tensors) - 1

        call = {"args": encode_value(list(args), tensor_index),
                "kwargs": {name: encode_value(value, tensor_index)
                           for name, value in kwargs.items()}}
        names = [argument.name for argument in func._schema.arguments]
        labels = [*names[:len(args)], *kwargs]
        self._per_op[info.qualified] = self._per_op.get(info.qualified, 0) + 1
        short = info.qualified.removeprefix("aten::")
        return {
            "case": len(self._cases) + 1, "name": f"{short}-{self._per_op[info.qualified]}",
            "model": self.model, "op": info.qualified, "first_seq": self.ops,
            "backward": node is not None, "call_site": call_site(node),
            "arguments": ", ".join(f"{label}={_text(value)}"
                                   for label, value in zip(labels, [*args, *kwargs.values()])),
            "call": _json(call), "tensors": self._tensor_rows(tensors, _tensor_labels(call, labels)),
            "input_bytes": sum(t.numel() * t.element_size() for t in tensors),
        }

    def _tensor_rows(self, tensors: list[torch.Tensor], labels: list[str]) -> list[dict]:
        """The case's tensors: real values if the new bytes fit the budget, else recipes."""
        new_bytes = sum(_stored_bytes(t) for t in tensors if self._known(t) is None)
        keep = self._writer.has_room(new_bytes)
        rows = []
        for label, tensor in zip(labels, tensors):
            row = {"arg": label, "dtype": str(tensor.dtype).removeprefix("torch."),
                   "shape": list(tensor.shape), "stride": list(tensor.stride())}
            stored = self._store(tensor) if keep and tensor.numel() else None
            keep = keep and (stored is not None or not tensor.numel())  # a failed write: no more
            if tensor.numel() == 0:
                row["source"] = "empty"
            elif stored is not None:
                row.update(source="values", **stored)
            else:
                row.update(source="recipe", **recipe(tensor))
            rows.append(row)
        return rows

    def _known(self, tensor: torch.Tensor) -> _Written | None:
        written = self._written.get(id(tensor))
        if written is None or written.ref() is not tensor or written.version != _version(tensor):
            return None
        return written

    def _store(self, tensor: torch.Tensor) -> dict[str, int] | None:
        """Where ``tensor``'s values are in the sidecar (written now unless they already are);
        None when the write fails (a full disk): the capture keeps recipes from then on."""
        written = self._known(tensor)
        if written is None:
            try:
                offset, nbytes = self._writer.append_exact(_to_numpy(host_view(tensor)))
            except OSError as exc:
                self._writer.max_bytes = 0  # no room any more
                warnings.warn(f"mluverify capture: could not write input values to "
                              f"{self._writer.root} ({exc}); the cases from here on keep recipes",
                              RuntimeWarning, stacklevel=2)
                return None
            key = id(tensor)
            written = _Written(weakref.ref(tensor, lambda _: self._written.pop(key, None)),
                               _version(tensor), offset, nbytes)
            self._written[key] = written
        return {"offset": written.offset, "nbytes": written.nbytes}

    def rows(self) -> list[dict[str, Any]]:
        return [{**case.row, "count": case.count} for case in self._cases.values()]

    def close(self) -> None:
        self._writer.close()


def _stored_bytes(tensor: torch.Tensor) -> int:
    """Sidecar bytes of ``tensor`` (bfloat16 is stored widened to float32, as numpy lacks it)."""
    return tensor.numel() * (4 if tensor.dtype == torch.bfloat16 else tensor.element_size())


def _version(tensor: torch.Tensor) -> int | None:
    try:
        return tensor._version
    except RuntimeError:  # inference-mode tensors have no version counter
        return None


def _text(value: Any) -> str:
    """An argument as people read it: tensors by dtype and shape, the rest by repr."""
    if isinstance(value, torch.Tensor):
        return describe(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    return repr(value)


def _tensor_labels(call: dict, labels: list[str]) -> list[str]:
    """The argument name of each ``{"tensor": i}`` in ``call`` (``tensors[1]`` in a list)."""
    found: list[str] = []

    def walk(data: Any, label: str) -> None:
        if isinstance(data, dict) and "tensor" in data:
            found.append(label)
        elif isinstance(data, list):
            for index, item in enumerate(data):
                walk(item, f"{label}[{index}]")

    for label, data in zip(labels, [*call["args"], *call["kwargs"].values()]):
        walk(data, label)
    return found


def _json(data: Any) -> str:
    import json

    return json.dumps(data, separators=(",", ":"), allow_nan=False)


class _CaptureMode(TorchDispatchMode):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace not in _BOOKKEEPING:
            self._recorder.record(func, args, kwargs)
        return func(*args, **kwargs)


@dataclass
class Capture:
    """A ``with`` block whose aten ops become a cases file (see ``capture``)."""

    path: Path
    model: str
    max_bytes: int | None = DEFAULT_MAX_BYTES
    error: str = ""  # the exception that ended the block, if one did
    cases: int = 0  # unique cases written
    ops: int = 0  # ops captured, repeats included
    left_out: dict[str, int] = field(default_factory=dict)  # provenance calls not captured, by op
    _recorder: _Recorder | None = field(default=None, repr=False)
    _mode: _CaptureMode | None = field(default=None, repr=False)

    def __enter__(self) -> "Capture":
        kernel_available()  # a first build (seconds) happens here, not inside the program's ops
        self.path = resolve_dump_dir(self.path)
        create_dump_dir(self.path, "capture path")
        self._recorder = _Recorder(self.path, self.model, self.max_bytes)
        self._mode = _CaptureMode(self._recorder)
        self._mode.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._mode.__exit__(exc_type, exc, tb)
        recorder = self._recorder
        recorder.close()
        if exc is not None:
            self.error = _error_text(exc)
        self.cases, self.ops, self.left_out = recorder.cases, recorder.ops, dict(recorder.left_out)
        write_cases(self.path, recorder.rows(), CasesMeta(
            model=self.model, torch=torch.__version__, complete=exc is None, error=self.error,
            max_bytes=self.max_bytes, ops=recorder.ops, left_out=self.left_out))


def capture(path: str | os.PathLike[str], *, model: str | None = None,
            max_bytes: int | None = DEFAULT_MAX_BYTES) -> Capture:
    """Record every aten op run inside the ``with`` block as deduplicated cases.

    :param path: the cases directory to write (``cases.parquet``, ``values.bin``); if it
        exists, ``path_1``, ``path_2``, ... is used (``Capture.path`` says which).
    :param model: the model's name in the cases (default: the directory's name).
    :param max_bytes: budget of real input values kept in the sidecar; past it, a case's
        inputs are kept as recipes. ``None``: no budget.

    An exception raised in the block propagates; the cases recorded up to it are written,
    with the error in the file's metadata (``complete`` false).
    """
    if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
        raise InvalidArgument(f"max_bytes must be a non-negative int or None, got "
                              f"{max_bytes!r} (type {type(max_bytes).__name__})")
    path = Path(path)
    return Capture(path, model or path.name, max_bytes)


def _error_text(exc: BaseException) -> str:
    """The exception and the program's line that raised it (outside torch and mluverify)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    site = program_site(tb.tb_frame, tb.tb_lineno) if tb is not None else ""
    text = f"{type(exc).__name__}: {exc}" + (f" (at {site})" if site else "")
    return text.replace("\n", " ")[:500]
