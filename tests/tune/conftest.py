"""The toy network with two planted layers (``toy_model.py``, also a model script), and a
clean fusion environment for every tuning test."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

TOY_SCRIPT = Path(__file__).with_name("toy_model.py")


@pytest.fixture(scope="session")
def toy():
    """The toy script's globals: ``model(planted=...)``, ``calibration_inputs()``, ``eval_inputs()``, ``PLANTED``."""
    import mluverify.device  # noqa: F401  (registers "mlu")

    return runpy.run_path(str(TOY_SCRIPT))


@pytest.fixture(autouse=True)
def no_forced_fallback(monkeypatch):
    monkeypatch.delenv("DEBUG_FORCED_FALLBACK_OPS", raising=False)
