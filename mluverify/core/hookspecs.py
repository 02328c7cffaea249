"""Every extension point of mluverify, in one place, grouped by phase.

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
    from mluverify.device.kernels import KernelRegistry
    from mluverify.report.diff import RunDiff
    from mluverify.report.gate import GateResult

PROJECT = "mluverify"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# ---------------------------------------------------------------------------------------------
# set-up hooks: called once, when the plugin manager (or the emulated device) is built
# ---------------------------------------------------------------------------------------------


@hookspec(historic=True)
def mluverify_add_backends(registry: BackendRegistry) -> None:
    """Add back ends (and with them, targets ``backend:mode``) to ``registry``.

    Called once per session registry, and (historic) for every plugin registered later, as it
    registers (a conftest.py that pytest finds while collecting). Call
    ``registry.add(backend)`` for each back end; a back end says itself whether it is available
    on this machine (see ``mluverify.core.backends.Backend``).

    :param registry: the registry of back ends of this session.
    """


@hookspec(historic=True)
def mluverify_device_kernels(registry: KernelRegistry) -> None:
    """Add or override emulated-MLU kernels, by ATen op name and execution mode.

    Called when ``mluverify.device`` is first imported (again by
    ``mluverify.device.reload_kernels()``), and (historic) for every plugin registered later,
    as it registers: its kernels take effect at once. Later registrations of the same op and
    mode win, so ``tryfirst`` built-ins can be overridden by ordinary third-party impls.

    :param registry: call ``registry.register("aten::add.Tensor", fn, mode="cnnl")``.
    """


@hookspec
def mluverify_fusible_ops() -> Iterable[str]:
    """Return ATen op names (``"aten::convolution"``) that may join a fusion group.

    The union of every plugin's answer, less ``DEBUG_FORCED_FALLBACK_OPS``, is the fusible set.
    """


@hookspec
def mluverify_quant_mapping() -> Mapping[type, type]:
    """Return a mapping float module class -> quantized module class.

    Merged over every plugin; used by ``quantize_dynamic_mlu`` when ``mapping`` is not given.
    Exact types are matched: a subclass of ``nn.Conv2d`` is not quantized.
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
def mluverify_report(frame: pandas.DataFrame, outdir: Path, gate: GateResult | None,
                     diff: RunDiff | None) -> None:
    """Write extra report outputs for a finished run. An implementation may take only the
    arguments it uses (e.g. ``frame`` and ``outdir``).

    :param frame: every record of the run, one row per comparison.
    :param outdir: the run's report directory.
    :param gate: the gate's result when the run was gated (``--mlu-gate``), else None.
    :param diff: the diff against the baseline when one was given (``--mlu-baseline``), else None.
    """
