"""Fixtures of the report tests; the record factories are in ``report_records``."""
from __future__ import annotations

import pluggy
import pytest


@pytest.fixture
def report_pm() -> pluggy.PluginManager:
    """A plugin manager with only the built-in report writers (the other built-ins belong to
    other parts of mluverify and are not needed to write reports)."""
    from mluverify.core import hookspecs
    from mluverify.plugins import report_writers

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(report_writers, name="mluverify.plugins.report_writers")
    return pm
