"""Quantization tests: this directory is on sys.path (pytest's prepend import mode), so test
modules import the numpy reference as ``quant_reference`` (and the real int8 targets' small
CNN as ``int8_models``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.report.records import ShardWriter


@pytest.fixture
def pipeline(tmp_path: Path) -> Pipeline:
    """A pipeline with the built-in plugins, writing its records under ``tmp_path``."""
    return Pipeline(new_plugin_manager(entry_points=False), Settings(), tmp_path / "run", ShardWriter)
