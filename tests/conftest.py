"""Shared set-up for mluverify's own tests."""
import os
import random
import runpy
from pathlib import Path

import pytest
import torch

SEED_SCRIPTS = Path(__file__).parent / "seed_scripts"
# mluverify's own tests run with two emulated MLU cards (the multi-card tests need a second one;
# everything else uses card 0). Read when the device is first imported, which is after this.
os.environ.setdefault("MLUVERIFY_DEVICE_COUNT", "2")


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    """The seeds' scripts call ``torch.set_grad_enabled(False)`` at module level; tests that run
    them in-process must not turn autograd off for the tests after them."""
    enabled = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(enabled)


@pytest.fixture
def run_seed_script(monkeypatch, tmp_path):
    """Run a script from ``tests/seed_scripts`` unchanged (``import torch_mlu`` resolves to
    mluverify) in a fresh working directory (the scripts save .pth files); returns its globals."""
    from mluverify import compat

    monkeypatch.chdir(tmp_path)
    compat.install()
    random.seed(0)
    torch.manual_seed(0)
    return lambda name: runpy.run_path(str(SEED_SCRIPTS / name), run_name="__main__")


@pytest.fixture
def float_matmul():
    """Unquantized float32 conv / matmul on MLU270 (the ``float`` matmul precision), for tests
    about an op's semantics rather than the device's numerics."""
    from mluverify.device.numerics import numerics_settings

    with numerics_settings(matmul_precision="float"):
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (order otherwise kept): under ``make test``'s pytest-xdist workers a
    minutes-long test handed out last would leave the other worker idle until it ends."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
