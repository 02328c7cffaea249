"""mluverify: verify PyTorch accelerator back ends against the CPU, within each mode's tolerance.

The core (the judge, cases, back ends, config, records, reports) imports neither pytest nor
torch. The pytest plugin is ``mluverify.pytest_plugin.plugin``, installed as the ``pytest11`` entry
point named ``mluverify``: ``pytest -p mluverify`` loads it by that name (pytest looks entry
points up first) and pytest also autoloads it; it stays inert in runs that record nothing.
``import mluverify.device`` registers the emulated device (and imports torch).

PYTEST_DONT_REWRITE: the package is the tool, not test code, and ``mluverify run`` imports it
before it starts pytest in the same process; this marker tells pytest not to rewrite its asserts
(else pytest warns at every run that the already imported module cannot be rewritten).
"""
from __future__ import annotations

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case, Target
from mluverify.judge import Tolerance, Verdict, assert_close, compare, metrics
from mluverify.core.expectations import matches_case_id
from mluverify.core.task import Task, TaskReferences
from mluverify.judge import TaskBudget
from mluverify.errors import ConfigError, InvalidArgument, MluverifyError, PluginError, RecordsError
from mluverify.core.hookspecs import hookimpl

from mluverify._version import __version__

# Where the entry point is not installed (a source checkout on PYTHONPATH), ``-p mluverify``
# imports this package as the plugin: pytest then loads the real plugin from this list. A list
# of names, so importing mluverify still imports no pytest.
pytest_plugins = ["mluverify.pytest_plugin.plugin"]

__all__ = [
    "Backend", "BackendRegistry", "Case", "ConfigError", "Execution", "InvalidArgument",
    "MluverifyError", "PluginError", "RecordsError", "Target", "Task", "TaskBudget", "TaskReferences", "Tolerance", "Verdict",
    "__version__", "assert_close", "compare", "hookimpl", "matches_case_id", "metrics",
]
