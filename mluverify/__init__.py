"""mluverify: verify PyTorch accelerator back ends against the CPU, within each mode's tolerance.

``pytest -p mluverify`` loads this module as a pytest plugin; the pytest hooks and the
``verify`` fixture below come from ``mluverify.pytest_plugin``. Importing mluverify never
imports torch nor registers the emulated device (``import mluverify.device`` does).
"""
from __future__ import annotations

from mluverify.backends import Backend, BackendRegistry, Execution
from mluverify.case import Case, Target
from mluverify.compare import Tolerance, Verdict, assert_close, compare, metrics
from mluverify.config import matches_case_id
from mluverify.errors import ConfigError, InvalidArgument, MluverifyError, PluginError, RecordsError
from mluverify.hookspecs import hookimpl
from mluverify.pytest_plugin import (
    pytest_addoption,
    pytest_configure,
    pytest_configure_node,
    pytest_generate_tests,
    pytest_sessionfinish,
    verify,
)

__version__ = "0.1.0"

__all__ = [
    "Backend", "BackendRegistry", "Case", "ConfigError", "Execution", "InvalidArgument",
    "MluverifyError", "PluginError", "RecordsError", "Target", "Tolerance", "Verdict",
    "__version__", "assert_close", "compare", "hookimpl", "matches_case_id", "metrics",
]
