"""Host memory of the emulated device: freed blocks stay with the process for reuse, as a
device's caching allocator keeps freed device memory.

The device's data and its kernels' temporaries are host memory from glibc's ``malloc``. A
product split across the cores (MLU370) makes partials several times the size of its result,
and glibc hands freed memory back to the kernel: a block over its mmap threshold at every free,
the top of a heap past its trim threshold, and a thread's secondary heap (64 MiB each; the
backward runs on autograd's own thread) once it is empty. Each page is faulted in again at its
next use: 30,000-130,000 faults in one MLU370 ResNet-50 training step on the 2-core VM, a
quarter of the step's CPU time. ``keep_freed_memory`` sets glibc to keep them: one heap for
every thread, the mmap threshold at its 32 MiB ceiling (fixed, so larger blocks only are
mapped afresh) and a 256 MiB trim threshold. It changes where memory comes from, never a value.
"""
from __future__ import annotations

import ctypes

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_SETTINGS = (
    (_M_ARENA_MAX, 1),
    (_M_MMAP_THRESHOLD, 32 * 2**20),  # the largest glibc accepts on 64-bit
    (_M_TRIM_THRESHOLD, 256 * 2**20),
)


def keep_freed_memory() -> bool:
    """Set glibc's ``malloc`` to keep freed memory for reuse (see the module docstring); False,
    changing nothing, where the C library is not glibc."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        return False
    return all(libc.mallopt(parameter, value) == 1 for parameter, value in _SETTINGS)
