"""The op suites' expectations: ``waivers.toml`` beside this file (the ops the emulated MLU has
no kernel for, waived as ``unsupported`` on the mlu targets), applied as ``mlu_waiver`` marks."""
from __future__ import annotations

from pathlib import Path

import pytest
from mluverify.core.expectations import load_waivers, marker_fields, waiver_for

WAIVERS_FILE = Path(__file__).with_name("waivers.toml")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    waivers = load_waivers(WAIVERS_FILE)
    for item in items:
        waiver = waiver_for(item.nodeid, waivers) if Path(item.path).parent == WAIVERS_FILE.parent else None
        if waiver is not None:
            item.add_marker(pytest.mark.mlu_waiver(waiver.reason, waiver.until, **marker_fields(waiver)))
