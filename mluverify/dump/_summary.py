"""What a dump keeps of one tensor, by level, computed once per unchanged tensor.

Level 0 keeps the first 10 values (no statistics: they would triple the cost of a level-0
dump, see shared notes "dumper-costs"); level 1 the sum of absolute values plus min, max,
mean and NaN/Inf counts; level 2 every value and the same statistics.
"""
from __future__ import annotations

import ctypes
import functools
import math
import weakref
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from mluverify.dump._format import TensorBlock
from mluverify.dump._fused import FusedStats, fused_stats, native
from mluverify.dump._host_memory import host_memory

HEAD = 10

# C++ at::ScalarType names, as Cambricon's dump headers print them.
_TYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
    torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
    torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
    torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}


def type_name(dtype: torch.dtype) -> str:
    """The C++ ScalarType name of ``dtype`` (``torch.float32`` -> ``"Float"``)."""
    return _TYPE_NAMES.get(dtype) or str(dtype).removeprefix("torch.").capitalize()


# The index columns a tensor's summary fills, in the order of ``TensorSummary.fields``.
TENSOR_COLUMNS = ("dtype", "shape", "stride", "numel", "level", "head",
                  "min", "max", "mean", "abs_sum", "nan", "inf")
_NO_STATS = (None,) * 6  # level 0 keeps no statistics


class TensorSummary(NamedTuple):
    """One tensor as dumped: the level used, its index columns (``TENSOR_COLUMNS``) and the
    numbers its dump file prints, worked out once: an unchanged tensor's summary is reused for
    every op that reads it. (A named tuple: one is made for every new tensor of a dump; the
    printed block is built only where a file is written.)"""

    type_name: str  # C++ ScalarType name, for the printed block
    level: int
    fields: tuple
    printed: Any  # the first 10 values (level 0), the abs sum (level 1), every value (level 2)
    exact: np.ndarray | None = None  # every value, for the binary sidecar (level 2 only)

    @property
    def block(self) -> TensorBlock:
        """The tensor's block in a Cambricon dump file."""
        _, shape, stride, numel = self.fields[:4]
        values = np.asarray([self.printed]) if self.level == 1 else self.printed
        return TensorBlock(self.type_name, tuple(shape), tuple(stride), numel, values)


def summarize(tensor: torch.Tensor, level: int) -> TensorSummary:
    """Summarize ``tensor`` (any device) at ``level``; run with dispatch modes disabled."""
    shape, stride, numel = tuple(tensor.shape), tensor.stride(), tensor.numel()
    if numel == 0:
        return _empty_summary(tensor.dtype, shape, stride, level)
    described = _described(tensor.dtype, shape, stride, numel, level)
    name = type_name(tensor.dtype)
    if level == 0:
        head = _head_values(tensor, numel)
        return TensorSummary(name, level, (*described, _floats(head), *_NO_STATS), head)
    host = host_view(tensor)
    # Statistics on the CPU: a device's own reduction kernels may round (float16 on the MLU).
    stats = _stats(host)
    if level == 1:
        return TensorSummary(name, level, (*described, None, *stats),
                             _printed_type(tensor.dtype)(stats[3]))  # the abs sum
    exact = _to_numpy(host)
    return TensorSummary(name, level, (*described, _floats(exact[:HEAD]), *stats), exact, exact)


@functools.lru_cache(maxsize=1024)
def _empty_summary(dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...],
                  level: int) -> TensorSummary:
    """The summary of a tensor without elements, which its metadata alone decides (a
    ResNet50 forward makes 159 of them: batch norm's unused statistics and workspaces)."""
    return TensorSummary(type_name(dtype), level,
                         (*_described(dtype, shape, stride, 0, level), None, *_NO_STATS),
                         np.empty(0))


def _described(dtype: torch.dtype, shape: tuple[int, ...], stride: tuple[int, ...], numel: int,
               level: int) -> tuple:
    """The first index columns of a tensor: dtype, shape, stride, numel, level."""
    return _dtype_text(dtype), list(shape), list(stride), numel, level


@functools.lru_cache(maxsize=None)
def _dtype_text(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def host_view(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s values as a CPU tensor: itself on the CPU, a zero-copy alias of emulated
    MLU memory (a copy would cost as much as the statistics), else a copy. A negative or
    conjugate view, whose memory holds the values before the sign or conjugation, comes back
    resolved (a copy)."""
    host = _host(tensor)
    if tensor.is_neg() or tensor.is_conj():
        if tensor.is_neg() and not host.is_neg():  # an alias of the memory lost the bit
            host = torch._neg_view(host)
        if tensor.is_conj() and not host.is_conj():
            host = host.conj()
        host = host.resolve_neg().resolve_conj()
    return host


def _host(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_cpu:
        return tensor.detach()
    device = host_memory(tensor.device.type)
    return tensor.detach().cpu() if device is None else device.as_cpu(tensor)


# Dtypes whose first values are read as raw bytes (numpy lacks bfloat16; complex values
# print through a host tensor).
_NUMPY_TYPES = {dtype: np.dtype(name) for dtype, name in (
    (torch.float32, "float32"), (torch.float64, "float64"), (torch.float16, "float16"),
    (torch.int64, "int64"), (torch.int32, "int32"), (torch.int16, "int16"), (torch.int8, "int8"),
    (torch.uint8, "uint8"), (torch.bool, "bool"))}


def _head_values(tensor: torch.Tensor, numel: int) -> np.ndarray:
    """A copy of the first ``HEAD`` values of ``tensor`` (any device). A contiguous CPU or
    emulated-MLU tensor's are read from its memory, without building a host tensor to read
    ten values."""
    numpy_type = _NUMPY_TYPES.get(tensor.dtype)
    if numpy_type is not None and tensor.is_contiguous() and not tensor.is_neg():
        read_bytes = _byte_reader(tensor)
        if read_bytes is not None:
            return np.frombuffer(read_bytes(tensor, min(HEAD, numel) * numpy_type.itemsize),
                                 numpy_type)
    return _head(host_view(tensor))


def _byte_reader(tensor: torch.Tensor) -> Callable[[torch.Tensor, int], bytes] | None:
    """How to copy bytes from ``tensor``'s first element on: CPU and emulated-MLU memory only."""
    if tensor.is_cpu:
        return _read_cpu_bytes
    device = host_memory(tensor.device.type)
    return None if device is None else device.read_bytes


def _read_cpu_bytes(tensor: torch.Tensor, nbytes: int) -> bytes:
    return ctypes.string_at(tensor.data_ptr(), nbytes)


def _floats(values: np.ndarray) -> list[float]:
    """Values as floats, whatever the dtype: one parquet column type for every row's head
    (complex values give their real parts)."""
    if values.dtype.kind == "c":
        values = values.real
    return values.tolist() if values.dtype.kind == "f" else values.astype(float).tolist()


def _printed_type(dtype: torch.dtype) -> type:
    return float if dtype.is_floating_point or dtype.is_complex else int


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor's values in logical (row-major) order; bfloat16, which numpy lacks, widens
    exactly."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.contiguous().numpy().reshape(-1)


def _head(tensor: torch.Tensor) -> np.ndarray:
    """A copy of the first ``HEAD`` values of a CPU tensor (it may be written in place later)."""
    if tensor.is_contiguous() and tensor.dtype != torch.bfloat16:
        return tensor.numpy().reshape(-1)[:HEAD].copy()  # the common case, without torch views
    return _to_numpy(_first(tensor, HEAD)).copy()


def _first(tensor: torch.Tensor, count: int) -> torch.Tensor:
    """The first ``count`` values in logical order without copying a large strided tensor."""
    if tensor.is_contiguous():
        return tensor.view(-1)[:count]
    view = tensor
    while view.dim() > 1 and math.prod(view.shape[1:]) >= count:
        view = view[0]  # the first `count` values all lie in the first row
    if view.dim() > 1:
        view = view[:math.ceil(count / math.prod(view.shape[1:]))]
    return view.reshape(-1)[:count]


def _stats(tensor: torch.Tensor) -> tuple[float, float, float, float, int, int]:
    """(min, max, mean, abs_sum, nan, inf) as torch's reductions give them (NaN and infinities
    propagate): one pass of the fused kernel for floating tensors, else torch's reductions."""
    if tensor.dtype == torch.bool:
        true_count = int(tensor.sum())
        return (float(tensor.all()), float(tensor.any()), true_count / tensor.numel(),
                float(true_count), 0, 0)
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    fused = fused_stats(tensor) if tensor.is_floating_point() else None
    if fused is None:
        return _torch_stats(tensor)
    return _propagated(fused, tensor.numel())


def _propagated(stats: FusedStats, numel: int) -> tuple[float, float, float, float, int, int]:
    """Finite-value statistics and non-finite counts as torch's aminmax, sum and L1 norm
    report them over all values."""
    nan, inf = stats.nan, stats.posinf + stats.neginf
    finite = numel - nan - inf
    if nan:
        return math.nan, math.nan, math.nan, math.nan, nan, inf
    low = -math.inf if stats.neginf else (stats.min if finite else math.inf)
    high = math.inf if stats.posinf else (stats.max if finite else -math.inf)
    total = (math.nan if stats.posinf and stats.neginf else
             math.inf if stats.posinf else -math.inf if stats.neginf else stats.sum)
    abs_sum = math.inf if inf else stats.abs_sum
    return low, high, total / numel, abs_sum, 0, inf


def _torch_stats(tensor: torch.Tensor) -> tuple[float, float, float, float, int, int]:
    """``_stats`` by torch's reductions, two or three passes: a tensor of one sign (a ReLU
    output) has ``abs_sum == |sum|``; NaN/Inf are counted only when min/max show some."""
    # Half-precision sums overflow past 65504: accumulate them in float32.
    wide = torch.float32 if tensor.dtype in (torch.float16, torch.bfloat16) else None
    low, high = (float(bound) for bound in torch.aminmax(tensor))
    total = float(tensor.sum(dtype=wide))
    if low >= 0 or high <= 0:
        abs_sum = abs(total)
    elif tensor.dtype.is_floating_point:
        abs_sum = float(torch.linalg.vector_norm(tensor, 1, dtype=wide))
    else:
        abs_sum = float(tensor.abs().sum())
    nan = inf = 0
    if not (math.isfinite(low) and math.isfinite(high)):
        nan, inf = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
    return low, high, total / tensor.numel(), abs_sum, nan, inf


class SummaryCache:
    """Summaries of tensors that have not changed since they were summarized.

    An op's output is usually the next op's input, and weights repeat across forwards (and
    across dumps, for levels 0 and 1): both are summarized once. A tensor counts as unchanged
    while it is the same object with the same version counter. Outputs are remembered only at
    the next op (``settle``), because an in-place op bumps its tensor's version after the
    dispatch handler has returned.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, int, TensorSummary, Any]] = {}
        self._pending: list[tuple[torch.Tensor, TensorSummary, Any]] = []

    def get(self, tensor: torch.Tensor, level: int) -> tuple[TensorSummary, Any] | None:
        """(summary, where it was written or None) if ``tensor`` is unchanged since."""
        entry = self._entries.get(id(tensor))
        if entry is None:
            return None
        ref, version, summary, written = entry
        if ref() is not tensor or _version(tensor) != version or summary.level != level:
            return None
        return summary, written

    def remember(self, tensor: torch.Tensor, summary: TensorSummary, written: Any = None) -> None:
        """Remember ``summary`` of ``tensor`` (and where it went) once the running op is over."""
        self._pending.append((tensor, summary, written))

    def forget(self, tensor: torch.Tensor) -> None:
        """Drop ``tensor`` (about to be written in place)."""
        self._entries.pop(id(tensor), None)

    def settle(self) -> None:
        """Store the summaries remembered during the previous op, with settled versions."""
        for tensor, summary, written in self._pending:
            version = _version(tensor)
            if version is not None:
                key = id(tensor)
                ref = weakref.ref(tensor, lambda _, key=key: self._entries.pop(key, None))
                self._entries[key] = (ref, version, summary, written)
        self._pending.clear()


def _version(tensor: torch.Tensor) -> int | None:
    try:
        return tensor._version
    except RuntimeError:  # inference-mode tensors have no version counter
        return None


# Summaries of levels 0 and 1 (no files in them), shared by every dump of the process.
SHARED_CACHE = SummaryCache()


@functools.cache
def shared_summaries(level: int) -> Any | None:
    """The C++ index core's summaries at ``level`` (0 or 1), shared by every index-layout dump
    of the process like ``SHARED_CACHE``; None without the C++ extension."""
    module = native()
    return None if module is None else module.Summaries(level, summarize)


def forget_shared_summaries() -> None:
    """Forget the summaries kept across dumps (levels 0 and 1), in Python and in C++."""
    SHARED_CACHE.__init__()
    for level in (0, 1):
        summaries = shared_summaries(level)
        if summaries is not None:
            summaries.clear()
