"""Every extension point of mluverify's core, in one place, grouped by phase (the emulated
device declares its own: ``mluverify.device_hookspecs``).

A plugin is any module or object with functions named like these hooks, decorated with
``mluverify.hookimpl``. Built-in behaviour lives in ``mluverify/plugins/`` and uses exactly
these hooks; third-party plugins register through the entry-point group ``mluverify`` or with
``-p module`` under pytest. Hooks are always called with keyword arguments.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import pluggy

if TYPE_CHECKING:
    import pandas
    from pathlib import Path

    from mluverify.core.backends import BackendRegistry
    from mluverify.core.case import Case
    from mluverify.judge import Tolerance

PROJECT = "mluverify"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------------------------
# set-up hooks: called when a run's plugin manager is built, configured and closed
# ---------------------------------------------------------------------------------------------


@hookspec(historic=True)
def mluverify_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications with ``pluginmanager.add_hookspecs(module)`` (as pytest's
    ``pytest_addhooks``).

    Called (historic) for every plugin as it registers; the hooks it adds apply to the plugins
    registered after it. The built-in ``mluverify.plugins.mlu_device`` adds the emulated
    device's hooks (``mluverify.device_hookspecs``) this way, so it loads before the others.

    :param pluginmanager: the run's plugin manager.
    """


@hookspec
def mluverify_configure(pluginmanager: pluggy.PluginManager) -> None:
    """The run starts: its plugins (built-ins, entry points, ``-p``) are registered.

    Called once per run (per pytest config, per CLI command), before the first case.

    :param pluginmanager: the run's plugin manager.
    """


@hookspec
def mluverify_plugin_registered(plugin: Any, pluginmanager: pluggy.PluginManager) -> None:
    """A plugin was registered through ``mluverify.core.plugin_manager.register`` (e.g. a
    conftest.py that pytest finds while collecting). A PluginError raised here unregisters it.

    :param plugin: the plugin that registered.
    :param pluginmanager: the run's plugin manager.
    """


@hookspec
def mluverify_unconfigure(pluginmanager: pluggy.PluginManager) -> None:
    """The run ends: undo what ``mluverify_configure`` set up outside the plugin manager, so
    a next run in the same process starts clean.

    :param pluginmanager: the run's plugin manager.
    """


@hookspec(historic=True)
def mluverify_add_backends(registry: BackendRegistry) -> None:
    """Add back ends (and with them, targets ``backend:mode``) to ``registry``.

    Called once per session registry, and (historic) for every plugin registered later, as it
    registers (a conftest.py that pytest finds while collecting). Call
    ``registry.add(backend)`` for each back end; a back end says itself whether it is available
    on this machine (see ``mluverify.core.backends.Backend``).

    :param registry: the registry of back ends of this session.
    """


# ---------------------------------------------------------------------------------------------
# judging hooks: called for every comparison
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def mluverify_tolerance(case: Case) -> Tolerance | None:
    """Return the tolerance for one case, or ``None`` to leave it to the next source.

    Resolution, most specific first: ``mlu_tolerance`` marker > this hook >
    ``[tool.mluverify.tolerances]`` > the mode's policy. Stops at the first non-None result.

    :param case: the case being judged (op, target, mode, dtype, quant, shape).
    """


@hookspec
def mluverify_metrics() -> Mapping[str, Callable[[Any, Any], float]]:
    """Return extra diagnostic metrics ``name -> f(actual, expected) -> float``.

    ``actual`` and ``expected`` are float64 numpy arrays with NaN/Inf already excluded.
    Each extra metric's value is added to the verdict's diagnostics and to the records.
    """


@hookspec
def mluverify_case_sources() -> Iterable[Any]:
    """Return case generators (e.g. PyTorch OpInfo samples) that suites may draw from.

    Each source is an object with ``name: str`` and ``cases(ops: Iterable[str]) -> Iterable``.
    """


# ---------------------------------------------------------------------------------------------
# record and report hooks
# ---------------------------------------------------------------------------------------------


@hookspec
def mluverify_record(record: dict[str, Any]) -> None:
    """Observe every record as it is made (after it is written to the run's shard).

    :param record: one comparison, with the columns of ``mluverify.report.records.SCHEMA``.
    """


@hookspec
def mluverify_report(frame: pandas.DataFrame, outdir: Path,
                     gate: "mluverify.report.gate.GateResult | None",  # named, not imported: the
                     diff: "mluverify.report.diff.RunDiff | None") -> None:  # report is a layer above
    """Write extra report outputs for a finished run. An implementation may take only the
    arguments it uses (e.g. ``frame`` and ``outdir``).

    :param frame: every record of the run, one row per comparison.
    :param outdir: the run's report directory.
    :param gate: the gate's result when the run was gated (``--mlu-gate``), else None.
    :param diff: the diff against the baseline when one was given (``--mlu-baseline``), else None.
    """
