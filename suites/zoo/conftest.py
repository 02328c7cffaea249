"""The zoo's pytest wiring: its models as parameters (``--mlu-zoo-model`` narrows them, an
unknown name is a usage error naming close matches), the expected statuses of
``expected_status.toml`` as ``mlu_waiver`` marks, a skip with the install line when the extra is
missing (``suites/conftest.py`` writes the dashboard with the run's reports).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from mluverify.core.expectations import marker_fields, waiver_for

from .zoo_models import INSTALL
from .zoo_status import EXPECTED_FILE, load_expected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    zoo = [item for item in items if Path(item.path).parent == Path(__file__).parent]
    missing = [name for name in ("timm", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        skip = pytest.mark.skip(reason=f"{', '.join(missing)} not installed: {INSTALL}")
        for item in zoo:
            item.add_marker(skip)
        return
    expected = load_expected(config.getoption("mlu_zoo_expected") or EXPECTED_FILE)
    for item in zoo:
        waiver = waiver_for(item.nodeid, expected)
        if waiver is not None:
            item.add_marker(pytest.mark.mlu_waiver(waiver.reason, waiver.until, **marker_fields(waiver)))
