"""Fixtures for the emulated-MLU tests: the device is registered once per test process."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import mluverify.device  # noqa: E402,F401  (registers the device)
from mluverify.device import mlu_model  # noqa: E402


@pytest.fixture
def core_version():
    """Select a core version for one test, restoring the previous one afterwards."""
    previous = mlu_model.get_core_version()
    yield mlu_model.set_core_version
    mlu_model.set_core_version(previous)


@pytest.fixture
def seeded():
    return torch.Generator().manual_seed(1234)
