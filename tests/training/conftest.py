"""Fixtures for the training tests: the device is registered once per test process."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import mluverify.device  # noqa: E402,F401  (registers the device)
