"""The Dumper's one-pass statistics kernel (``_stats.cpp``), built on first use.

``fused_stats(tensor)`` gives min, max, sum, sum of absolute values and sum of squares of the
finite values of a CPU floating tensor, and its NaN, +Inf and -Inf counts, in one pass (torch
needs a reduction per statistic). The kernel is compiled with ``torch.utils.cpp_extension``
(a C++17 compiler and ninja, as for the emulated MLU's extension) into
``MLUVERIFY_NATIVE_DIR`` (default ``mluverify/dump/build/``) the first time a process needs
it and the library there is missing or built from another source or torch; later processes
load it. Where it cannot be built, ``fused_stats`` returns None (one warning says why) and
the callers use torch's reductions.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import warnings
from pathlib import Path
from typing import NamedTuple

import torch

SOURCE = Path(__file__).with_name("_stats.cpp")
NAME = "mluverify_dump_stats"


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
    """One pass over a CPU floating ``tensor``; None when the kernel is unavailable."""
    if not kernel_available():
        return None
    low, high, total, abs_total, squares, nan, posinf, neginf = \
        torch.ops.mluverify_dump.stats(tensor)
    return FusedStats(low, high, total, abs_total, squares, int(nan), int(posinf), int(neginf))


@functools.cache
def kernel_available() -> bool:
    """Load the kernel (building it if needed), once per process."""
    directory = Path(os.environ.get("MLUVERIFY_NATIVE_DIR") or Path(__file__).with_name("build"))
    library, stamp = directory / f"{NAME}.so", directory / f"{NAME}.fingerprint"
    fingerprint = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()).hexdigest()
    try:
        if library.is_file() and stamp.is_file() and stamp.read_text() == fingerprint:
            torch.ops.load_library(str(library))
        else:
            _build(directory)
            stamp.write_text(fingerprint)
    except (OSError, RuntimeError) as exc:
        warnings.warn(f"mluverify dump: the one-pass statistics kernel {SOURCE.name} could not be "
                      f"built into {directory} ({exc}); statistics use torch's reductions (slower; "
                      f"set MLUVERIFY_NATIVE_DIR to a writable directory, install g++ and ninja)",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def _build(directory: Path) -> None:
    from torch.utils import cpp_extension

    directory.mkdir(parents=True, exist_ok=True)
    # cpp_extension warns on import when the machine has no CUDA runtime: irrelevant here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    cpp_extension.load(name=NAME, sources=[str(SOURCE)], build_directory=str(directory),
                       extra_cflags=["-O3"], is_python_module=False)
