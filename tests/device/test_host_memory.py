"""The emulated device keeps freed host memory for reuse (``mluverify.device._host_memory``):
blocks a thread (as autograd's backward is one) filled and freed stay resident, where glibc's
defaults hand them back to the kernel (each page then faults again at its next use).
Each probe runs in a fresh process: one that imports the device, one that does not."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

BLOCKS, BLOCK_MIB = 10, 20  # 200 MiB in blocks under the 32 MiB mmap threshold the device fixes


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def kept_fraction() -> float:
    """The fraction of 200 MiB, filled and freed in a new thread, still resident afterwards."""
    import torch

    torch.set_num_threads(1)
    sizes: list[int] = []

    def work() -> None:
        sizes.append(_resident_bytes())
        blocks = [torch.ones(BLOCK_MIB * 2**18) for _ in range(BLOCKS)]
        sizes.append(_resident_bytes())
        del blocks
        sizes.append(_resident_bytes())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    before, filled, freed = sizes
    return (freed - before) / (filled - before)


def _probe(with_device: bool) -> float:
    device = "import mluverify.device; " if with_device else ""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); {device}"
            "import test_host_memory; print(test_host_memory.kept_fraction())")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(not (hasattr(ctypes.CDLL(None), "gnu_get_libc_version") and Path("/proc/self/statm").exists()),
                    reason="the policy is glibc's malloc settings (measured through Linux's /proc)")
def test_the_device_keeps_freed_host_memory_where_glibc_returns_it():
    assert _probe(with_device=True) > 0.9
    assert _probe(with_device=False) < 0.5
