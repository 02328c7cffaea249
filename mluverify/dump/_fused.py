"""The Dumper's C++ parts (``_stats.cpp``, ``_core.cpp``), one extension built on first use.

``fused_stats(tensor)`` gives min, max, sum, sum of absolute values and sum of squares of the
finite values of a CPU floating tensor, and its NaN, +Inf and -Inf counts, in one pass (torch
needs a reduction per statistic). ``index_core(level, ...)`` is the per-op work of an index
layout dump at levels 0 and 1 (``_core.cpp``). The extension is compiled with
``torch.utils.cpp_extension`` (a C++17 compiler and ninja, as for the emulated MLU's
extension) into ``MLUVERIFY_NATIVE_DIR`` (default ``mluverify/dump/build/``) the first time a
process needs it and the library there is missing or built from other sources or torch; later
processes load it. Where it cannot be built, ``native()`` returns None (one warning says why):
statistics use torch's reductions and every dump runs in Python.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import torch

SOURCES = tuple(Path(__file__).with_name(name) for name in ("_stats.cpp", "_core.cpp"))
HEADER = Path(__file__).with_name("_stats.h")
NAME = "mluverify_dump_native"


class FusedStats(NamedTuple):
    """Statistics of the finite values, and the counts of the others."""

    min: float
    max: float
    sum: float
    abs_sum: float
    squares: float
    nan: int
    posinf: int
    neginf: int


def fused_stats(tensor: torch.Tensor) -> FusedStats | None:
    """One pass over a CPU floating ``tensor``; None when the extension is unavailable."""
    if native() is None:
        return None
    low, high, total, abs_total, squares, nan, posinf, neginf = \
        torch.ops.mluverify_dump.stats(tensor)
    return FusedStats(low, high, total, abs_total, squares, int(nan), int(posinf), int(neginf))


def kernel_available() -> bool:
    """Whether the extension is loaded (building it if needed)."""
    return native() is not None


@functools.cache
def native() -> ModuleType | None:
    """The extension module, loaded (and built if needed) once per process; None where it
    cannot be built."""
    directory = Path(os.environ.get("MLUVERIFY_NATIVE_DIR") or Path(__file__).with_name("build"))
    library, stamp = directory / f"{NAME}.so", directory / f"{NAME}.fingerprint"
    sources = b"".join(path.read_bytes() for path in (*SOURCES, HEADER))
    fingerprint = hashlib.sha256(sources + torch.__version__.encode()).hexdigest()
    try:
        if library.is_file() and stamp.is_file() and stamp.read_text() == fingerprint:
            return _load(library)
        module = _build(directory)
        stamp.write_text(fingerprint)
        return module
    except (OSError, RuntimeError, ImportError) as exc:
        warnings.warn(f"mluverify dump: the C++ extension ({', '.join(p.name for p in SOURCES)}) "
                      f"could not be built into {directory} ({exc}); statistics use torch's "
                      f"reductions and dumps run in Python (slower; set MLUVERIFY_NATIVE_DIR to a "
                      f"writable directory, install g++ and ninja)", RuntimeWarning, stacklevel=3)
        return None


def _load(library: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(NAME, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(directory: Path) -> ModuleType:
    from torch.utils import cpp_extension

    directory.mkdir(parents=True, exist_ok=True)
    # cpp_extension warns on import when the machine has no CUDA runtime: irrelevant here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    return cpp_extension.load(name=NAME, sources=[str(path) for path in SOURCES],
                              build_directory=str(directory), extra_cflags=["-O3"],
                              is_python_module=True)
