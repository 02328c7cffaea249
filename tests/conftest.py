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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--heavy", action="store_true",
                     help="also run the tests marked heavy (make test-heavy); make test leaves them out")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Heavy tests (minutes of CPU: kill loops, whole-suite subprocess runs) only with ``--heavy``,
    so ``make test`` stays within its 10 minutes on 2 cores. Then the slow tests first (order
    otherwise kept): under pytest-xdist a minutes-long test handed out last would leave the
    other worker idle until it ends."""
    if not config.getoption("heavy"):
        opt_in = pytest.mark.skip(reason="heavy test, not in make test: run make test-heavy (pytest --heavy)")
        for item in items:
            if item.get_closest_marker("heavy"):
                item.add_marker(opt_in)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
