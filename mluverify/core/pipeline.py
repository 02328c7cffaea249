"""The verification pipeline: runs cases on targets and on the CPU, judges them and records them.

One ``Pipeline`` per run (per process under xdist), built by a front end (the pytest plugin) and
handed what it needs: the plugin manager, the settings, where records go. Each comparison has
one tolerance (``mluverify.judge.resolve_tolerance``), one verdict, one status and one
``Record``; ``grad=True`` judges the output and every gradient of the probe of
``mluverify.core.gradients`` the same way. Nothing here knows pytest, and torch is imported only
where a case runs (``mluverify.core.golden``, ``cast_floating``).
"""
from __future__ import annotations

import copy
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import pluggy

from mluverify.core import status as statuses
from mluverify.core.backends import Backend, BackendRegistry, Execution, GroupOutputs, map_tensors
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.expectations import Waiver
from mluverify.core.golden import Golden, dtypes_in, identical, leaf_dtypes, run_golden
from mluverify.core.gradients import GRAD, GROUP, OUTPUT, gradient_probe, ops_on_cpu, probe_leaves, summed_biases
from mluverify.core.plugin_manager import call_hook
from mluverify.core.provenance import ops_under_test_on_cpu, run_recording
from mluverify.core.record import Record, make_record
from mluverify.core.selections import device_forward_reference, record as record_selections
from mluverify.core.task import Task, TaskResult
from mluverify.errors import ConfigError, Unsupported
from mluverify.judge import Tolerance, Verdict, compare, judge_zero_sum, policy, resolve_tolerance, zero_sum_applies


@dataclass(frozen=True)
class Outcome:
    """A judged and recorded case: the verdict, its status (``mluverify.core.status``) and why, and
    the waiver that excused it when one did."""

    verdict: Verdict
    record: Record
    status: str
    why: str = ""
    waiver: Waiver | None = None

    @property
    def waived(self) -> bool:
        return self.status == statuses.WAIVED


@dataclass(frozen=True)
class Checks:
    """What a case checks beyond its verdict: ``golden`` computes the float64 reference (the
    ``golden`` policy needs it; other policies record device and reference error);
    ``expect_non_finite``: outputs NaN/Inf everywhere are what the case expects."""

    golden: bool = False
    expect_non_finite: bool = False


class RecordWriter(Protocol):
    """Where a run's records go (``mluverify.report.records.ShardWriter``)."""

    def write(self, record: Record) -> None: ...

    def close(self) -> None: ...


# Dumps a failing case (``mluverify.dump.dump_case``): (fn, args, kwargs, directory) -> the
# directory the dump of ``fn(*args, **kwargs)`` went to.
DumpCase = Callable[[Callable[..., Any], tuple, Mapping[str, Any], Path], Path]


@dataclass(frozen=True)
class _Comparison:
    """One judged value of a case: what it is (``gradients.OUTPUT``, ``GRAD``, ``PARAM``), its
    verdict, and the ops under test among the CPU fallbacks that concern it."""

    kind: str
    verdict: Verdict
    ops_on_cpu: tuple[str, ...]


@dataclass(frozen=True)
class _Judged:
    """A case run on its target and judged, not yet decided nor recorded."""

    case: Case
    execution: Execution
    comparisons: list[_Comparison]
    note: str = ""  # why the golden reference did not judge, when it was asked for
    nondeterminism: str = ""
    task: TaskResult | None = None


@dataclass
class Pipeline:
    """Back ends, tolerances and the record writer of one run (one per process under xdist).

    ``open_writer(run_dir, worker)`` opens the record writer at the first record;
    ``dump_case``: dump every failing case (outputs only) into ``run_dir/dumps``."""

    pm: pluggy.PluginManager
    settings: Settings
    run_dir: Path
    open_writer: Callable[[Path, str], RecordWriter]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    worker: str = "main"
    dump_case: DumpCase | None = None
    backends: BackendRegistry = field(init=False)
    extra_metrics: dict[str, Callable] = field(init=False)
    _writer: RecordWriter | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.backends = BackendRegistry()
        call_hook(self.pm, "mluverify_add_backends", registry=self.backends)
        self.extra_metrics = {}
        for contributed in call_hook(self.pm, "mluverify_metrics"):
            self.extra_metrics.update(contributed)
        self._check_tolerance_modes()

    def _check_tolerance_modes(self) -> None:
        """A tolerance key naming a mode no back end has would never apply: say so at start-up."""
        modes = {mode for backend in self.backends for mode in backend.modes}
        table = self.settings.tolerances
        for key, mode in table.modes().items():
            if mode not in modes:
                where = f"{table.source}: " if table.source else ""
                raise ConfigError(f"{where}[tool.mluverify.tolerances] key {key!r}: no back end has mode "
                                  f"{mode!r}; modes: {', '.join(sorted(modes))}")

    def resolve(self, target: Target | str) -> tuple[Target, Backend]:
        return self.backends.resolve(target)

    def verify(self, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case, *,
               tolerance: Tolerance | float | None = None, waiver: Waiver | None = None,
               checks: Checks = Checks(), grad: bool = False, optimizer: Callable | None = None,
               task: Task | None = None) -> Outcome:
        """Run ``fn`` on the case's target and on the CPU (float32; float64 too when the golden
        reference is on), judge, decide the status, record, return.

        ``tolerance``: the marker's (see ``resolve_tolerance``). ``grad``: forward and backward,
        the output and every gradient judged, each its own record, the worst outcome returned
        (``mluverify.core.gradients``; ``optimizer``: a factory whose one step is judged too; no
        determinism re-run nor failure dump). ``task``: a task metric scored on the output and
        gated by its threshold (``mluverify.core.task``; not with ``grad``). A device (or
        reference) that raises is recorded as ``errored`` and the exception re-raised. A case
        the back end does not run as it asks (``Backend.refusal``, or a back end raising
        ``Unsupported`` as it runs) raises ``Unsupported`` and is not recorded.
        """
        _, backend = self.resolve(case.target)
        if grad and task is not None:
            raise ConfigError(f"{case.case_id}: a task metric judges an output; it cannot go with grad=True")
        case = as_run(backend, fn, case, grad=grad)
        started = time.perf_counter()
        try:
            judged = (self._judge_gradients(backend, fn, args, kwargs, case, tolerance, checks, optimizer) if grad
                      else self._judge_output(backend, fn, args, kwargs, case, tolerance, checks, task))
        except Unsupported:
            raise
        except Exception as exc:
            self.write_errored(case, _one_line(exc), time.perf_counter() - started, kind=GRAD if grad else OUTPUT)
            raise
        case = judged.case
        # compiling is recorded apart (compile_s), so duration_s compares with eager targets
        duration_s = time.perf_counter() - started - (judged.execution.info.get("compile_s") or 0.0)
        if (self.dump_case is not None and not grad and case.mode not in backend.opaque_modes
                and not all(c.verdict.passed for c in judged.comparisons)):
            dumped = self._dump(backend, fn, cast_floating(args, case.dtype), kwargs, case)
            case = replace(case, reproducer=f"{case.reproducer}; dump: {dumped}")
        outcomes = [self._record(case, comparison, judged, duration_s, waiver) for comparison in judged.comparisons]
        return min(outcomes, key=lambda outcome: statuses.STATUSES.index(outcome.status))

    def judge_pair(self, actual: Any, expected: Any, case: Case, execution: Execution, *,
                   ops_on_cpu: tuple[str, ...] = (), tolerance: Tolerance | float | None = None,
                   waiver: Waiver | None = None, duration_s: float = 0.0) -> Outcome:
        """Judge and record a pair the caller computed itself (a seed-style unittest,
        ``mluverify.testing``): ``actual`` the device's result (on the CPU), ran as ``execution``
        says, ``expected`` the CPU reference; ``ops_on_cpu`` the fallbacks that computed it.
        ``tolerance`` as for ``verify``; a golden rule judges by the case's policy instead (there is
        no callable to run in float64), with a note."""
        resolved, note = self._tolerance(case, tolerance), ""
        if resolved.needs_golden:
            resolved = self._policy(case)
            note = f"golden reference unavailable (the test computed the pair); judged by {resolved.source} instead"
        comparison = _Comparison(OUTPUT, self._compare(actual, expected, None, resolved, case, Checks()),
                                 tuple(ops_on_cpu))
        return self._record(case, comparison, _Judged(case, execution, [comparison], note), duration_s, waiver)

    def _judge_output(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case,
                      marker: Tolerance | float | None, checks: Checks, task: Task | None = None) -> _Judged:
        device_args = cast_floating(args, case.dtype)
        execution = backend.execute(fn, device_args, dict(kwargs), case=case)
        nondeterminism = self._second_run(backend, fn, device_args, kwargs, case, execution)
        if execution.fallback_ops and not case.aten_ops:  # which fallback computed the case?
            expected, dispatched = run_recording(fn, *args, **kwargs)
        else:  # nothing fell back, or the case names its ops: recording would tell nothing
            expected, dispatched = fn(*args, **kwargs), None
        tolerance, golden, note = self._tolerance_and_golden(fn, args, kwargs, case, marker, checks)
        verdict = self._compare(as_reference_dtype(execution.output, case.dtype), expected, golden.output,
                                tolerance, case, checks)
        verdict = _dtypes_checked(verdict, execution.output, expected, fn, args, kwargs, case.dtype)
        comparison = _Comparison(OUTPUT, verdict, ops_under_test_on_cpu(case, execution.fallback_ops, dispatched))
        scored = task.score(execution.output, expected, case.case_id) if task is not None else None
        groups, unjudged = self._group_comparisons(backend, execution, tolerance, case, checks)
        note = "; ".join(filter(None, (note, unjudged)))
        return _Judged(case, execution, [comparison, *groups], note, nondeterminism, scored)

    def _group_comparisons(self, backend: Backend, execution: Execution, tolerance: Tolerance, case: Case,
                           checks: Checks) -> tuple[list[_Comparison], str]:
        """One comparison per fusion group call of a fused run (``Execution.groups``): the
        group's outputs against its own graph on the CPU, judged by the case's tolerance (by its
        policy where that is the golden rule: a group has no float64 run). The verdict names the
        group and its ops. Also a note naming the groups left unjudged, and why."""
        if tolerance.needs_golden:
            tolerance = policy(policy_name(backend, case))
        unjudged = "; ".join(f"{_group_value(group)} not judged: its own graph raised on the CPU ({group.unjudged})"
                             for group in execution.groups if group.unjudged)
        comparisons = []
        for group in (group for group in execution.groups if not group.unjudged):
            # both sides in float32: the reference runs the group in float32, but a constant it makes
            # in float16 (a mask's zeros(dtype=float16)) stays float16 there
            verdict = self._compare(upcast_floating(group.actual), upcast_floating(group.expected), None, tolerance,
                                    case, checks)
            comparisons.append(_Comparison(GROUP, replace(
                verdict, leaf=f"{group.name}{'.' + group.inside if group.inside else ''}{verdict.leaf}",
                reason=f"{_group_value(group)} against {group.against or 'its own graph on the CPU'}: "
                       f"{verdict.reason}"), ()))
        return comparisons, unjudged

    def _judge_gradients(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
                         case: Case, marker: Tolerance | float | None, checks: Checks,
                         optimizer: Callable | None) -> _Judged:
        probe = gradient_probe(fn, case, optimizer, args, kwargs)
        upstream, forward = run_recording(probe.upstream, args, kwargs)
        probe_args = (upstream, *args)
        execution, chosen = record_selections(
            lambda: backend.execute(probe, cast_floating(probe_args, case.dtype), dict(kwargs), case=case))
        expected, whole = run_recording(copy.deepcopy(probe), *probe_args, **kwargs)
        dispatched = forward.with_backward(whole)
        expected, following = device_forward_reference(lambda: copy.deepcopy(probe)(*probe_args, **kwargs),
                                                        chosen, expected)
        tolerance, golden, note = self._tolerance_and_golden(probe, probe_args, kwargs, case, marker, checks)
        # a bias gradient whose sum cancels (0 by symmetry: an attention key bias) is judged against
        # the float64 value, not the CPU's rounding (mluverify.judge.judge_zero_sum)
        summed, unsummed = summed_biases(probe, upstream, args, kwargs) if zero_sum_applies(tolerance) else ({}, "")
        note = "; ".join(filter(None, (following, note, unsummed)))
        comparisons = []
        for leaf in probe_leaves(probe, args, kwargs, as_reference_dtype(execution.output, case.dtype), expected,
                                 golden.output):
            verdict = self._compare(leaf.actual, leaf.expected, leaf.golden, tolerance, case, checks)
            if leaf.name in summed:
                verdict = judge_zero_sum(verdict, leaf.actual, summed[leaf.name], tolerance, case.dtype)
            comparisons.append(_Comparison(leaf.kind, replace(verdict, leaf=leaf.name + verdict.leaf),
                                           ops_on_cpu(leaf.kind, case, execution.fallback_ops, dispatched)))
        return _Judged(case, execution, comparisons, note)

    def _second_run(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
                    case: Case, first: Execution) -> str:
        """For a ``determinism_share`` of cases (chosen by case id, the same in every run): run
        the case on the device again; ``""`` when both runs are bit-identical, else where not."""
        share = self.settings.determinism_share
        if zlib.crc32(case.case_id.encode()) % 10_000 >= share * 10_000:
            return ""
        return identical(first.output, backend.execute(fn, args, dict(kwargs), case=case).output)

    def _tolerance_and_golden(self, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case,
                              marker: Tolerance | float | None, checks: Checks) -> tuple[Tolerance, Golden, str]:
        """The case's tolerance (resolved once), the golden float64 run of ``fn`` when asked
        for, and a note when it is unavailable (then the mode's policy judges instead of
        ``golden``)."""
        tolerance = self._tolerance(case, marker)
        golden = run_golden(fn, args, kwargs) if checks.golden or tolerance.needs_golden else Golden()
        note = f"golden reference unavailable ({golden.unavailable})" if golden.unavailable else ""
        if tolerance.needs_golden and golden.output is None:
            tolerance = self._policy(case)
            note += f"; judged by {tolerance.source} instead"
        return tolerance, golden, note

    def _tolerance(self, case: Case, marker: Tolerance | float | None) -> Tolerance:
        """The case's tolerance, resolved once: ``marker`` > hook > table > its policy."""
        _, backend = self.resolve(case.target)
        hook = None if marker is not None else call_hook(self.pm, "mluverify_tolerance", case=case)
        return resolve_tolerance(op=case.op, dtype=case.dtype, mode=case.mode, policy_name=policy_name(backend, case),
                                 marker=marker, hook=hook, table=self.settings.tolerances)

    def _policy(self, case: Case) -> Tolerance:
        """The case's policy: what judges it when its golden rule has no golden result."""
        _, backend = self.resolve(case.target)
        return policy(policy_name(backend, case))

    def _compare(self, actual: Any, expected: Any, golden: Any, tolerance: Tolerance, case: Case,
                 checks: Checks) -> Verdict:
        """The verdict on one value, by its resolved tolerance."""
        return compare(actual, expected, tolerance=tolerance, dtype=case.dtype, extra_metrics=self.extra_metrics,
                       golden=golden, golden_rules=self.settings.golden,
                       expect_non_finite=checks.expect_non_finite)

    def _record(self, case: Case, comparison: _Comparison, judged: _Judged, duration_s: float,
                waiver: Waiver | None) -> Outcome:
        """Decide the status of one comparison (a live waiver excuses any but a pass, unless its
        judged value is above the waiver's ceiling for the comparison's kind), record it; a task
        metric below its threshold fails the case whatever its output's error."""
        verdict, execution = comparison.verdict, judged.execution
        task_failure = judged.task.reason() if judged.task is not None else ""
        status, why = statuses.decide(statuses.Facts(
            verdict.passed and not task_failure,
            ops_on_cpu=comparison.ops_on_cpu,
            not_fused_reason=execution.not_fused_reason if execution.executed_as == "layer-by-layer" else None,
            nondeterminism=judged.nondeterminism,
        ))
        if status == statuses.FAILED and verdict.passed:
            why = task_failure  # the output is within its bound: the task metric failed it
        concerning = waiver if status != statuses.PASSED else None
        if concerning is not None and concerning.over_ceiling(verdict.value, comparison.kind):
            why = "; ".join(filter(None, (concerning.worsened(verdict.metric, verdict.value, comparison.kind), why)))
        elif concerning is not None and not concerning.expired():
            # what it was, once: the record's reason adds the verdict's own
            status, why = statuses.WAIVED, f"{status}: {why}" if why else status
        record = make_record(self.run_id, case, verdict, execution, duration_s, status=status,
                             why="; ".join(filter(None, (why, judged.note))), kind=comparison.kind,
                             ops_on_cpu=comparison.ops_on_cpu, waiver=concerning, task=judged.task)
        self.write(record)
        return Outcome(verdict, record, status, why, waiver)

    def _dump(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
              case: Case) -> Path:
        """Re-run a failing case on its target under ``dump_case``; returns the dump's path
        relative to the run directory (which is renamed when the run ends, and may be merged
        with runs from other machines)."""
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.case_id)[-120:]
        dumped = self.dump_case(lambda: backend.execute(fn, args, dict(kwargs), case=case), (), {},
                                self.run_dir / "dumps" / name)
        return Path(dumped).relative_to(self.run_dir)

    def write_errored(self, case: Case, why: str, duration_s: float = 0.0, *, kind: str = OUTPUT) -> None:
        """Record a case that could not be judged (its device, reference or inputs raised)."""
        self.write(make_record(self.run_id, case, None, Execution(None), duration_s, status=statuses.ERRORED,
                               why=why, error=why, kind=kind))

    def write(self, record: Record) -> None:
        """Write ``record`` to the run's records, then show it to ``mluverify_record``."""
        if self._writer is None:
            self._writer = self.open_writer(self.run_dir, self.worker)
        self._writer.write(record)
        call_hook(self.pm, "mluverify_record", record=record.as_row())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def _group_value(group: GroupOutputs) -> str:
    """What a group comparison compares, for its reason: the group's outputs, or a value inside it."""
    if group.inside:
        return f"value {group.inside} ({', '.join(group.ops) or 'any op'}) inside fusion group {group.name}"
    return f"fusion group {group.name} ({len(group.ops)} ops: {', '.join(dict.fromkeys(group.ops))})"


# The documents' rule for quantized models (int8 / int16): the fused / quantized bound, on any target.
QUANTIZED_POLICY = "cnml"


def policy_name(backend: Backend, case: Case) -> str:
    """The policy that judges ``case`` by default: ``QUANTIZED_POLICY`` for a quantized case,
    else its mode's."""
    return QUANTIZED_POLICY if case.quant else backend.policy(case.mode)


def as_run(backend: Backend, fn: Callable, case: Case, *, grad: bool = False) -> Case:
    """``case`` as ``backend`` will run it: quantized as the module already is (a
    ``quantize_dynamic_mlu`` model) when the case names no quantization; ``Unsupported`` with the
    back end's reason when it does not run the case as asked (``Backend.refusal``; ``grad``: with
    its backward), so a record never claims a quantization or a precision that did not happen."""
    refusal = backend.refusal(fn, case, grad=grad)
    if refusal:
        raise Unsupported(f"case {case.case_id}: {refusal}")
    found = backend.quantized_width(fn)
    return replace(case, quant=found) if found and not case.quant else case


def _dtypes_checked(verdict: Verdict, output: Any, expected: Any, fn: Callable, args: tuple,
                    kwargs: Mapping[str, Any], dtype: str) -> Verdict:
    """``verdict``, failed where the device's output tensors are not of the dtypes torch gives in
    ``dtype``: judging upcasts a reduced-precision output to the float32 reference, which would
    hide a float32 result of a float16 op. A float32 reference output stands for one in
    ``dtype``; only where the device differs from that do torch's fake kernels decide (an op
    with an explicit float32 ``dtype=`` gives float32 in float16 too)."""
    if dtype == "float32":
        return verdict
    got, reference = leaf_dtypes(output), leaf_dtypes(expected)
    if got == [dtype if kind == "float32" else kind for kind in reference]:
        return verdict
    wanted = dtypes_in(fn, args, kwargs, dtype)
    if isinstance(wanted, str) or got == wanted or len(got) != len(wanted):
        return verdict  # fake tensors cannot tell, torch agrees, or the compared structure differs (judged)
    index, device_dtype, torch_dtype = next((i, g, w) for i, (g, w) in enumerate(zip(got, wanted)) if g != w)
    return replace(verdict, passed=False,
                   reason=f"dtype mismatch: output {index} is {device_dtype}, torch's in {dtype} is {torch_dtype}; "
                          f"{verdict.reason}")


def cast_floating(obj: Any, dtype: str) -> Any:
    """``obj`` with every floating tensor cast to ``dtype`` (the device's precision)."""
    if dtype == "float32":
        return obj
    import torch

    target = getattr(torch, dtype)
    return map_tensors(lambda t: t.to(target) if t.is_floating_point() else t, obj)


def as_reference_dtype(obj: Any, dtype: str) -> Any:
    """Device outputs computed in a reduced precision, upcast to the CPU reference's float32."""
    return obj if dtype == "float32" else upcast_floating(obj)


def upcast_floating(obj: Any) -> Any:
    """``obj`` with every floating tensor in float32 (the CPU references' precision)."""
    return map_tensors(lambda t: t.float() if t.is_floating_point() else t, obj)


def _one_line(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    site = f" ({where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{site}".replace("\n", " ")[:500]
