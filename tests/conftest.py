"""Shared set-up for mluverify's own tests."""
import random
import runpy
from pathlib import Path

import pytest
import torch

SEED_SCRIPTS = Path(__file__).parent / "seed_scripts"


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
