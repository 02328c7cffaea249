"""Cambricon's per-op unittest scripts, judged and recorded by mluverify: ``TestCase``.

The seeds' op tests are ``unittest`` scripts, one file per op, each runnable alone
(``python test_add.py``), ``@unittest.skip("not test")`` leaving a function out and a
``test_all_operators.py`` running them all. A script written on ``mluverify.testing.TestCase``
runs the same way standalone and under ``pytest -p mluverify``; its
``assertTensorsEqual(a, b, prec, use_MSE=True)`` (Cambricon's signature: ``a`` the CPU result,
``b`` the device's) judges the pair with mluverify's judge and writes one record per comparison,
like a ``verify`` case:

* the target (``mlu:cnnl`` or ``mlu:cnml``) and core version: under pytest the run's
  (``--mlu-target``, ``--mlu-core-version``: one item per test method, target and core version,
  ``test_add[mlu:cnnl-MLU270]``); standalone ``$MLUVERIFY_TARGET`` and
  ``$MLUVERIFY_CORE_VERSION``, else the first of ``[tool.mluverify] targets`` / ``core_versions``;
  the test's body runs on that mode's kernels and core version;
* ``prec`` bounds the metric the flags name (``use_MSE``: rel_mse, ``use_RAE``: rae,
  ``use_RMA``: rma, none: the largest absolute difference, as Cambricon's); without ``prec`` the
  case's tolerance resolves as any case's (the ``mluverify_tolerance`` hook,
  ``[tool.mluverify.tolerances]``, the mode's policy: cnnl 0.3 %, cnml 2 %);
* a computing op that ran as a CPU fallback since the previous comparison makes the comparison
  ``not_on_device``, and on ``mlu:cnml`` a comparison no fused program computed (no fused call
  since the previous one) is ``not_fused``: never a plain pass;
* records go to the run's records under pytest; standalone to ``$MLUVERIFY_REPORT`` (shards:
  ``mluverify report DIR`` merges them and writes the reports), or nowhere when it is unset;
* no float64 golden reference: the test computes its own pair.

docs/seed_tests.md has the whole story.
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import inspect
import itertools
import os
import sys
import time
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from mluverify.core.backends import Execution, map_tensors
from mluverify.core.case import Case, Target
from mluverify.core.pipeline import Outcome, Pipeline, as_reference_dtype
from mluverify.core.provenance import PLUMBING, is_view, overload_free
from mluverify.core.status import PASSED
from mluverify.errors import InvalidArgument
from mluverify.judge import Tolerance

if TYPE_CHECKING:
    from mluverify.core.config import Settings
    from mluverify.core.expectations import Waiver

__all__ = ["TestCase"]
# unittest leaves this module's frames out of a failure's traceback, as it does its own asserts'
__unittest = True

TARGET_ENV = "MLUVERIFY_TARGET"
CORE_VERSION_ENV = "MLUVERIFY_CORE_VERSION"
REPORT_ENV = "MLUVERIFY_REPORT"
# assertTensorsEqual's flags and the metric each bounds; none set: the largest absolute difference.
FLAG_METRICS = {"use_MSE": "rel_mse", "use_RAE": "rae", "use_RMA": "rma"}
DEFAULT_METRIC = "max_abs"
POLICY_METRIC = "rel_mse"  # what the cnnl (0.3 %) and cnml (2 %) policies bound: Cambricon's use_MSE
SOURCE = "assertTensorsEqual"  # the record's tolerance_source of a bound the test gave (prec)


@dataclass(frozen=True)
class SeedRun:
    """Where one test's comparisons go, made by a front end: the pytest plugin per item, or the
    TestCase itself when it runs standalone.

    ``test_id``: the test on this target (case ids are it, ``#2``, ...); ``waiver(case)``: the
    waiver covering a case, if any; ``settle(outcome, case, note)``: what a judged comparison does
    to the test (returns, or raises its failure, skip or xfail; ``note``: the assertion's message).
    """

    pipeline: Pipeline
    target: Target
    core_version: str
    test_id: str
    suite: str
    reproducer: str
    waiver: Callable[[Case], "Waiver | None"]
    settle: Callable[[Outcome, Case, str], None]


_RUN: contextvars.ContextVar[SeedRun | None] = contextvars.ContextVar("mluverify_seed_run", default=None)


@contextlib.contextmanager
def seed_run(run: SeedRun) -> Iterator[SeedRun]:
    """Run the ``TestCase`` tests called in this block on ``run`` (the pytest plugin's hand-off)."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


# The modes of the mlu back end a seed script runs on: its ops on that mode's kernels (the scripts
# move tensors to "mlu" themselves; a CNML script traces its module, which the device then fuses).
MODES = ("cnnl", "cnml")


def unsupported(target: Target) -> str:
    """Why a seed script cannot run on ``target`` ("" when it can)."""
    if target.backend == "mlu" and target.mode in MODES:
        return ""
    return (f"seed-style tests (mluverify.testing.TestCase) run on {', '.join(f'mlu:{m}' for m in MODES)}, "
            f"not {target}: the scripts move their tensors to 'mlu' themselves")


class _RunningTest:
    """A test running on ``run``'s target: its comparisons numbered, and how the device ran what
    it computed between them: ``fallbacks`` (the device's FallbackTracker), ``fused_calls`` (the
    fused calls' summaries, ``track_fused_calls``), ``device_facts()`` (the record's facts of the
    device now: implementation, the core version the script may have set, core number). None: the
    device does not report them (a real torch_mlu)."""

    def __init__(self, run: SeedRun, fallbacks: Any, fused_calls: list | None,
                 device_facts: Callable[[], dict[str, Any]]) -> None:
        self.run = run
        self.fallbacks = fallbacks
        self.fused_calls = fused_calls
        self.device_facts = device_facts
        self.comparisons = itertools.count(1)
        self._seen: collections.Counter[str] = collections.Counter()
        self._fused_seen = 0
        self._since = time.perf_counter()

    def take(self) -> tuple[Execution, float]:
        """How the device ran what the test computed since the last take, and the seconds taken."""
        counts = collections.Counter(self.fallbacks.counts if self.fallbacks is not None else {})
        fell_back = tuple(op for op, calls in counts.items() if calls > self._seen[op])
        fused = None if self.fused_calls is None else self.fused_calls[self._fused_seen:]
        executed_as, not_fused_reason = _how_it_ran(self.run.target, fused)
        now = time.perf_counter()
        self._seen, self._fused_seen = counts, self._fused_seen + len(fused or ())
        since, self._since = self._since, now
        return Execution(None, fell_back, executed_as, not_fused_reason, self.device_facts()), now - since


# How a fused call ran, the worst first.
_FUSED_ORDER = ("layer-by-layer", "partially fused", "fused")
NOT_TRACED = ("no fused program ran since the previous comparison: the test's ops ran one by one on "
              "the cnml kernels (a CNML op test traces its module, torch.jit.trace(model, x), and calls it "
              "on 'mlu' inputs; a CNNL test says mlu_targets('mlu:cnnl'))")


def _how_it_ran(target: Target, fused_calls: list | None) -> tuple[str, str]:
    """``(executed_as, not_fused_reason)`` of a comparison: on ``mlu:cnml`` the worst of the fused
    calls made since the previous comparison, layer by layer when there was none; elsewhere (and
    where the device reports no fused calls) ``device``."""
    if target.mode != "cnml" or fused_calls is None:
        return "device", ""
    if not fused_calls:
        return "layer-by-layer", NOT_TRACED
    worst = min(fused_calls, key=lambda call: _FUSED_ORDER.index(call.executed_as))
    return worst.executed_as, worst.not_fused_reason


def _computing(fallback_ops: tuple[str, ...]) -> tuple[str, ...]:
    """The fallbacks that computed something: a seed script tests one op, so each of them computed
    (part of) the value it compares next (copies, views and factories aside: ``PLUMBING``)."""
    return tuple(op for op in fallback_ops if overload_free(op) not in PLUMBING and not is_view(op))


@contextlib.contextmanager
def _on_device(run: SeedRun) -> Iterator[_RunningTest]:
    """The test's body on ``run``'s target: its mode's kernels, its core version, fallbacks and
    fused calls watched."""
    from mluverify.plugins.mlu_backend import (EMULATOR, TORCH_MLU, device_impl, emulator_facts, running_on_emulator,
                                               running_on_torch_mlu, torch_mlu_facts)

    why = unsupported(run.target)
    if why:
        raise InvalidArgument(why)
    if device_impl() == TORCH_MLU:
        with running_on_torch_mlu(run.core_version):
            yield _RunningTest(run, None, None, lambda: {"device_impl": TORCH_MLU, **torch_mlu_facts(run.core_version)})
        return
    from mluverify.device import kernel_mode, track_fallbacks
    from mluverify.device.fusion import track_fused_calls

    with running_on_emulator(run.core_version, run.target.mode), kernel_mode(run.target.mode), \
            track_fallbacks() as fallbacks, track_fused_calls() as fused_calls:
        yield _RunningTest(run, fallbacks, fused_calls,
                           lambda: {"device_impl": EMULATOR, **emulator_facts(run.target.mode)})


class TestCase(unittest.TestCase):
    """A seed-style op test: ``unittest.TestCase`` with Cambricon's ``assertTensorsEqual``, each
    comparison judged by mluverify's judge and recorded (module docstring).

    ``seed``: torch's random seed at the start of each test (recorded in the ``seed`` column).
    """

    seed: int = 0

    def run(self, result: unittest.TestResult | None = None) -> unittest.TestResult | None:
        """Run the test on the target of the run in force (under pytest), else standalone."""
        run = _RUN.get()
        if run is not None:
            return self._run_on(run, result)
        with _standalone_run(self) as standalone:
            return self._run_on(standalone, result)

    def _run_on(self, run: SeedRun, result: unittest.TestResult | None) -> unittest.TestResult | None:
        import torch

        torch.manual_seed(self.seed)  # the same inputs in every run: a baseline compares like with like
        with _on_device(run) as running:
            self._running = running
            try:
                return super().run(result)
            finally:
                del self._running

    def assertTensorsEqual(self, a: Any, b: Any, prec: float | None = None, message: str = "",
                           allow_inf: bool = False, use_MSE: bool = False, use_RAE: bool = False,
                           use_RMA: bool = False) -> None:
        """Judge the device's ``b`` against the CPU's ``a`` and record the comparison; fail the test
        unless it passed (Cambricon's signature).

        ``prec``: the bound on the metric the flags name (``use_MSE``: rel_mse with Cambricon's eps
        rule, ``use_RAE``: rae, ``use_RMA``: rma, none: max_abs); None: the case's resolved
        tolerance (hook, ``[tool.mluverify.tolerances]``, the mode's policy, which bound rel_mse:
        ``use_RAE`` / ``use_RMA`` need ``prec``). ``allow_inf``: infinities at the same places pass
        (without it an infinity is recorded as an error, as Cambricon's fails on it).
        ``message``: heads the failure.
        """
        __tracebackhide__ = True
        running = getattr(self, "_running", None)
        if running is None:
            raise InvalidArgument("assertTensorsEqual runs inside a test run by mluverify.testing.TestCase.run "
                                  "(unittest's runner or pytest); it was called outside one")
        run = running.run
        metric = _metric(prec, use_MSE=use_MSE, use_RAE=use_RAE, use_RMA=use_RMA)
        expected, actual = _on_cpu(a), _on_cpu(b)
        execution, duration_s = running.take()
        case = _case(run, self, next(running.comparisons), actual)
        actual = as_reference_dtype(actual, case.dtype)
        infinite = "" if allow_inf else _infinite(expected, actual)
        if infinite:
            run.pipeline.write_errored(case, infinite, duration_s)
            raise self.failureException(f"{message + ': ' if message else ''}{case.op} on {case.target}: {infinite}")
        tolerance = Tolerance(metric or DEFAULT_METRIC, prec, SOURCE) if prec is not None else None
        outcome = run.pipeline.judge_pair(actual, expected, case, execution,
                                          ops_on_cpu=_computing(execution.fallback_ops),
                                          tolerance=tolerance, waiver=run.waiver(case), duration_s=duration_s)
        running.take()  # what judging ran is no part of the next comparison
        run.settle(outcome, case, message)


def _metric(prec: float | None, **flags: bool) -> str:
    """The metric assertTensorsEqual's flags name ("" for none). More than one is an error, and so
    is use_RAE / use_RMA without ``prec``: the modes' policies bound rel_mse, and a flag that
    nothing bounds would be silently ignored."""
    chosen = [name for name, on in flags.items() if on]
    if len(chosen) > 1:
        raise InvalidArgument(f"assertTensorsEqual: {' and '.join(f'{name}=True' for name in chosen)}: "
                              f"set at most one of {', '.join(FLAG_METRICS)}")
    metric = FLAG_METRICS[chosen[0]] if chosen else ""
    if prec is None and metric not in ("", POLICY_METRIC):
        raise InvalidArgument(f"assertTensorsEqual({chosen[0]}=True) without prec: the modes' policies bound "
                              f"{POLICY_METRIC}, not {metric}; pass prec (the bound on {metric})")
    return metric


def _on_cpu(value: Any) -> Any:
    """A tensor (or nest of tensors) detached and on the CPU, as the judge reads it."""
    return map_tensors(lambda t: t.detach().cpu(), value)


def _infinite(expected: Any, actual: Any) -> str:
    """Why the pair cannot be judged without ``allow_inf`` ("" when neither side has an infinity)."""
    import torch

    sides = [name for name, value in (("a (cpu)", expected), ("b (device)", actual))
             if isinstance(value, torch.Tensor) and value.is_floating_point() and bool(torch.isinf(value).any())]
    if not sides:
        return ""
    return f"infinite values in {' and '.join(sides)}; pass allow_inf=True to judge them (same places required)"


def _case(run: SeedRun, test: TestCase, call: int, actual: Any) -> Case:
    """Comparison ``call`` of ``test`` on ``run``'s target: op named by the script's file
    (``test_add.py``: ``add``, the seeds' one file per op), dtype and shape of the device's result."""
    script = Path(inspect.getfile(type(test))).stem
    shape = getattr(actual, "shape", None)
    dtype = getattr(actual, "dtype", None)
    return Case(case_id=run.test_id if call == 1 else f"{run.test_id}#{call}",
                op=script.removeprefix("test_"), target=run.target, suite=run.suite,
                dtype=str(dtype).removeprefix("torch.") if dtype is not None and dtype.is_floating_point else "float32",
                shape=("x".join(map(str, shape)) or "scalar") if shape is not None else "",
                seed=test.seed, reproducer=run.reproducer, core_version=run.core_version)


# --- standalone: python test_add.py -----------------------------------------------------------

class _Unrecorded:
    """The record writer of a standalone run without ``$MLUVERIFY_REPORT``: judged, not kept."""

    def __init__(self, run_dir: Path, worker: str = "main") -> None:
        """No directory: nothing is written."""

    def write(self, record: Any) -> None:
        """Keep nothing: no report directory was asked for."""

    def close(self) -> None:
        """Nothing to close."""


@contextlib.contextmanager
def _standalone_run(test: TestCase) -> Iterator[SeedRun]:
    """The run of one test outside pytest: the settings and plugins of the project pytest would
    root the script at (entry points included, so a plugin's device kernels apply), the target
    and core version of the environment or the settings, records to ``$MLUVERIFY_REPORT``."""
    from mluverify.core.config import load_settings
    from mluverify.core.plugin_manager import configured_plugin_manager
    from mluverify.project import find_rootdir, pyproject_of
    from mluverify.report.records import ShardWriter

    script = Path(inspect.getfile(type(test))).resolve()
    root = find_rootdir([str(script)])
    settings = load_settings(pyproject_of(root))
    report = os.environ.get(REPORT_ENV)
    with configured_plugin_manager() as pm:
        pipeline = Pipeline(pm, settings, Path(report or "."), ShardWriter if report else _Unrecorded)
        target, core_version = _standalone_variant(pipeline, settings)
        where = script.relative_to(root) if script.is_relative_to(root) else script
        variant = f"{target}-{core_version}" if core_version else str(target)
        try:
            yield SeedRun(pipeline, target, core_version, f"{where.as_posix()}::{_test_name(test, '::')}[{variant}]",
                          suite=where.parts[1] if len(where.parts) > 2 and where.parts[0] == "suites" else "",
                          reproducer=_standalone_reproducer(script, test, target, core_version),
                          waiver=lambda case: _standalone_waiver(case, settings),
                          settle=lambda outcome, case, note: _settle_standalone(test, outcome, case, note, settings))
        finally:
            pipeline.close()


def _standalone_variant(pipeline: Pipeline, settings: Settings) -> tuple[Target, str]:
    """The target and core version of a standalone run: ``$MLUVERIFY_TARGET`` and
    ``$MLUVERIFY_CORE_VERSION``, else the first of the settings'; an error names the variable."""
    from mluverify.errors import MluverifyError

    target_text = os.environ.get(TARGET_ENV)
    try:
        target, backend = pipeline.resolve(target_text or settings.targets[0])
    except MluverifyError as exc:
        raise InvalidArgument(f"${TARGET_ENV}={target_text}: {exc}" if target_text else str(exc)) from None
    core_version = os.environ.get(CORE_VERSION_ENV)
    try:
        variants = backend.variants_for((core_version,) if core_version else settings.core_versions[:1])
    except MluverifyError as exc:
        raise InvalidArgument(f"${CORE_VERSION_ENV}={core_version}: {exc}" if core_version else str(exc)) from None
    return target, variants[0] if variants else ""


def _standalone_reproducer(script: Path, test: TestCase, target: Target, core_version: str) -> str:
    env = f"{TARGET_ENV}={target}" + (f" {CORE_VERSION_ENV}={core_version}" if core_version else "")
    return f"{env} {Path(sys.executable).name} {script} {_test_name(test, '.')}"


def _test_name(test: TestCase, separator: str) -> str:
    """``TestAdd::test_add`` (a node id's tail), ``TestAdd.test_add`` (unittest's argument)."""
    return f"{type(test).__qualname__}{separator}{test._testMethodName}"


def _standalone_waiver(case: Case, settings: Settings) -> Waiver | None:
    """The configured waiver covering ``case`` where it runs (``[tool.mluverify.waivers]``)."""
    import torch

    from mluverify.core.expectations import Where, waiver_for

    return waiver_for(case.case_id, settings.waivers, Where(str(case.target), case.core_version or None, None,
                                                            torch.__version__))


def _settle_standalone(test: TestCase, outcome: Outcome, case: Case, note: str, settings: Settings) -> None:
    """unittest's side of a judged comparison: a pass (or an allowed status) returns; a waived
    one, or one whose status ``[tool.mluverify] skip`` lists, skips the test; anything else fails
    it with the verdict."""
    __tracebackhide__ = True
    if outcome.status == PASSED or outcome.status in settings.allow:
        return
    headline = f"{note + ': ' if note else ''}{case.op} on {case.target}/{case.core_version} ({case.dtype}): "
    if outcome.waived or outcome.status in settings.skip:
        raise unittest.SkipTest(f"{headline}{outcome.record.reason}")
    raise test.failureException(f"{headline}{outcome.status}: {outcome.why}\n{outcome.verdict.message}"
                                if outcome.why else f"{headline}{outcome.verdict.message}")
