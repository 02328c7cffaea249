"""Pinned host memory and non-blocking copies, as in native PyTorch (seed 003, 锁页内存)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

REPO = Path(__file__).resolve().parents[2]


def test_pin_memory_and_is_pinned():
    x = torch.randn(4, 5)
    pinned = x.pin_memory()
    assert not x.is_pinned() and pinned.is_pinned()
    assert torch.equal(pinned, x) and pinned.data_ptr() != x.data_ptr()
    assert pinned[1:, 2:].is_pinned(), "a view into a pinned block is pinned"
    assert pinned.pin_memory() is pinned
    assert torch.empty(3, pin_memory=True).is_pinned()


def test_non_blocking_copies_to_the_host_and_back():
    x = torch.randn(6, 7)
    on_device = x.to("mlu")
    host = on_device.to("cpu", non_blocking=True)
    assert host.is_pinned(), "a non-blocking copy to the host lands in pinned memory, as on CUDA"
    assert torch.equal(host, x)
    back = host.to("mlu", non_blocking=True)
    assert back.device == torch.device("mlu:0") and torch.equal(back.cpu(), x)
    blocking = on_device.to("cpu")
    assert not blocking.is_pinned() and torch.equal(blocking, x)


class _Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        return torch.full((2, 3), float(index * index)), index


def test_pinned_data_loader_with_two_workers_feeds_the_device():
    loader = DataLoader(_Squares(), batch_size=4, shuffle=False, num_workers=2, pin_memory=True)
    seen = []
    for images, target in loader:
        assert images.is_pinned() and target.is_pinned()
        on_device = images.to(torch.device("mlu"), non_blocking=True)
        seen += (on_device.cpu()[:, 0, 0] ** 0.5).round().long().tolist()
    assert seen == list(range(10))


@pytest.mark.slow
def test_the_extension_builds_from_source_into_a_fresh_directory(tmp_path):
    # What a fresh clone's bootstrap does (make venv: python -m mluverify.device._native): the
    # first import finds no library, compiles the C++ hooks with the machine's compiler, loads them.
    code = ("import torch, mluverify.device; from mluverify.device import _native; "
            "print(_native.library_path(), _native.is_current(), torch.randn(2).pin_memory().is_pinned())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
                               "MLUVERIFY_NATIVE_DIR": str(tmp_path / "native")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(tmp_path / "native" / "mluverify_native.so"), "True", "True"]
