"""A verification session: runs cases on targets and on the CPU, judges them and records them.

The pytest plugin and the CLI both drive one ``Session``; nothing here knows pytest, and torch
is imported only where a case runs (``mluverify.core.golden``, ``cast_floating``).
"""
from __future__ import annotations

import json
import math
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pluggy

from mluverify.core import status as statuses
from mluverify.core.backends import Backend, BackendRegistry, Execution, map_tensors
from mluverify.core.case import Case, Target
from mluverify.judge import METRIC_NAMES, Tolerance, Verdict, compare, policy, resolve_tolerance
from mluverify.core.config import Settings, Waiver
from mluverify.errors import ConfigError
from mluverify.core.plugin_manager import call_hook
from mluverify.core.provenance import ops_under_test_on_cpu
from mluverify.core.golden import Golden, identical, run_golden
from mluverify.report.records import PROVENANCE_COLUMNS, ShardWriter


@dataclass(frozen=True)
class Outcome:
    """A judged and recorded case: the verdict, its status (``mluverify.core.status``) and why, and
    the waiver that excused it when one did."""

    verdict: Verdict
    record: Mapping[str, Any]
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


@dataclass
class Session:
    """Back ends, tolerances and the record writer of one run (one per process under xdist)."""

    pm: pluggy.PluginManager
    settings: Settings
    run_dir: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    worker: str = "main"
    dump_failures: bool = False
    backends: BackendRegistry = field(init=False)
    extra_metrics: dict[str, Callable] = field(init=False)
    _writer: ShardWriter | None = field(init=False, default=None)

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
        for key, mode in self.settings.tolerances.modes().items():
            if mode not in modes:
                raise ConfigError(f"[tool.mluverify.tolerances] key {key!r}: no back end has mode "
                                  f"{mode!r}; modes: {', '.join(sorted(modes))}")

    def resolve(self, target: Target | str) -> tuple[Target, Backend]:
        return self.backends.resolve(target)

    def tolerance(self, case: Case, marker: Tolerance | float | None = None) -> Tolerance:
        """Marker > hook ``mluverify_tolerance`` > ``[tool.mluverify.tolerances]`` > policy."""
        _, backend = self.resolve(case.target)
        hook = None if marker is not None else call_hook(self.pm, "mluverify_tolerance", case=case)
        return resolve_tolerance(op=case.op, dtype=case.dtype, mode=case.mode,
                                 policy_name=backend.policy(case.mode), marker=marker, hook=hook,
                                 table=self.settings.tolerances)

    def verify(self, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case, *,
               tolerance: Tolerance | float | None = None, waiver: Waiver | None = None,
               checks: Checks = Checks(), grad: bool = False, optimizer: Callable | None = None) -> Outcome:
        """Run ``fn`` on the case's target and on the CPU (float32; float64 too when the golden
        reference is on), judge, decide the status, record, return.

        ``grad``: forward and backward, the output and every gradient judged, each its own record
        (``mluverify.core.gradients``; ``optimizer``: a factory whose one step is judged too).
        A device (or reference) that raises is recorded as ``errored`` and the exception re-raised.
        """
        if grad:
            from mluverify.core.gradients import verify_gradients

            return verify_gradients(self, fn, args, kwargs, case, tolerance=tolerance, waiver=waiver,
                                    checks=checks, optimizer=optimizer)
        _, backend = self.resolve(case.target)
        started = time.perf_counter()
        device_args = cast_floating(args, case.dtype)
        try:
            execution = backend.execute(fn, device_args, dict(kwargs), case=case)
            nondeterminism = self._second_run(backend, fn, device_args, kwargs, case, execution)
            expected = fn(*args, **kwargs)
            verdict, golden_note = self._judge(fn, args, kwargs, case, execution, expected, tolerance, checks)
        except Exception as exc:
            self.write(make_record(self.run_id, case, None, Execution(None), time.perf_counter() - started,
                                   status=statuses.ERRORED, why=_one_line(exc), error=_one_line(exc)))
            raise
        # compiling is recorded apart (compile_s), so duration_s compares with eager targets
        duration_s = time.perf_counter() - started - (execution.info.get("compile_s") or 0.0)
        if self.dump_failures and not verdict.passed:
            dumped = self._dump(backend, fn, device_args, kwargs, case)
            case = replace(case, reproducer=f"{case.reproducer}; dump: {dumped}")
        status, why = statuses.decide(statuses.Facts(
            verdict.passed,
            ops_on_cpu=ops_under_test_on_cpu(case, execution.fallback_ops),
            not_fused_reason=execution.not_fused_reason if execution.executed_as == "layer-by-layer" else None,
            nondeterminism=nondeterminism,
        ))
        if status != statuses.PASSED and waiver is not None and not waiver.expired():
            status, why = statuses.WAIVED, f"{status}: {why or verdict.reason}"
        record = make_record(self.run_id, case, verdict, execution, duration_s, status=status,
                             why="; ".join(filter(None, (why, golden_note))))
        self.write(record)
        return Outcome(verdict, record, status, why, waiver)

    def _second_run(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
                    case: Case, first: Execution) -> str:
        """For a ``determinism_share`` of cases (chosen by case id, the same in every run): run
        the case on the device again; ``""`` when both runs are bit-identical, else where not."""
        share = self.settings.determinism_share
        if zlib.crc32(case.case_id.encode()) % 10_000 >= share * 10_000:
            return ""
        return identical(first.output, backend.execute(fn, args, dict(kwargs), case=case).output)

    def tolerance_and_golden(self, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case,
                             marker: Tolerance | float | None, checks: Checks) -> tuple[Tolerance, Golden, str]:
        """The case's tolerance, the golden float64 run of ``fn`` when asked for, and a note when
        it is unavailable (then the mode's policy judges instead of ``golden``)."""
        tolerance = self.tolerance(case, marker)
        golden = run_golden(fn, args, kwargs) if checks.golden or tolerance.golden else Golden()
        note = f"golden reference unavailable ({golden.unavailable})" if golden.unavailable else ""
        if tolerance.golden and golden.output is None:
            tolerance = policy(self.resolve(case.target)[1].policy(case.mode))
            note += f"; judged by {tolerance.source} instead"
        return tolerance, golden, note

    def _judge(self, fn: Callable, args: tuple, kwargs: Mapping[str, Any], case: Case, execution: Execution,
               expected: Any, marker: Tolerance | float | None, checks: Checks) -> tuple[Verdict, str]:
        """The verdict, and a note when the golden reference was asked for but is unavailable."""
        tolerance, golden, note = self.tolerance_and_golden(fn, args, kwargs, case, marker, checks)
        verdict = compare(as_reference_dtype(execution.output, case.dtype), expected, tolerance=tolerance,
                          dtype=case.dtype, extra_metrics=self.extra_metrics, golden=golden.output,
                          golden_rules=self.settings.golden, expect_non_finite=checks.expect_non_finite)
        return verdict, note

    def _dump(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
               case: Case) -> Path:
        """Re-run a failing case on its target under the Dumper (level 1, CPU re-run of each op);
        returns the dump's path relative to the run directory (which is renamed when the run
        ends, and may be merged with runs from other machines)."""
        from mluverify.dump import dump_case

        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.case_id)[-120:]
        dumped = dump_case(lambda: backend.execute(fn, args, dict(kwargs), case=case), (), {},
                           self.run_dir / "dumps" / name)
        return Path(dumped).relative_to(self.run_dir)

    def write(self, record: dict[str, Any]) -> None:
        if self._writer is None:
            self._writer = ShardWriter(self.run_dir, self.worker)
        self._writer.write(record)
        call_hook(self.pm, "mluverify_record", record=record)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def cast_floating(obj: Any, dtype: str) -> Any:
    """``obj`` with every floating tensor cast to ``dtype`` (the device's precision)."""
    if dtype == "float32":
        return obj
    import torch

    target = getattr(torch, dtype)
    return map_tensors(lambda t: t.to(target) if t.is_floating_point() else t, obj)


def as_reference_dtype(obj: Any, dtype: str) -> Any:
    """Device outputs computed in a reduced precision, upcast to the CPU reference's float32."""
    if dtype == "float32":
        return obj
    return map_tensors(lambda t: t.float() if t.is_floating_point() else t, obj)


def make_record(run_id: str, case: Case, verdict: Verdict | None, execution: Execution,
                duration_s: float, *, status: str, why: str = "", error: str = "") -> dict[str, Any]:
    """One row of the records (see ``mluverify.report.records.COLUMNS``)."""
    diagnostics = dict(verdict.diagnostics) if verdict else {}
    extra = {k: v for k, v in diagnostics.items() if k not in METRIC_NAMES}
    device_error = verdict.device_error if verdict else None
    reference_error = verdict.reference_error if verdict else None
    reason = verdict.reason if verdict else ""
    return {
        "run_id": run_id,
        "case_id": case.case_id,
        "suite": case.suite,
        "op": case.op,
        "target": str(case.target),
        "backend": case.backend,
        "mode": case.mode,
        "dtype": case.dtype,
        "quant": case.quant,
        "shape": case.shape,
        "metric": verdict.metric if verdict else "",
        "value": verdict.value if verdict else math.nan,
        "bound": verdict.bound if verdict else math.nan,
        "passed": bool(verdict and verdict.passed),
        "headroom": verdict.headroom if verdict else 0.0,
        **{name: diagnostics.get(name) for name in METRIC_NAMES},
        "extra_metrics": json.dumps(extra) if extra else "",
        "nan_mismatch": verdict.nan_mismatch if verdict else 0,
        "fallback_ops": ",".join(execution.fallback_ops),
        "seed": case.seed,
        "reproducer": case.reproducer,
        "duration_s": duration_s,
        "reason": f"{why}; {reason}" if why and reason and why != error else (reason or why),
        "error": error,
        "waived": status == statuses.WAIVED,
        "status": status,
        "kind": "output",
        "leaf": verdict.leaf if verdict else "",
        "executed_as": execution.executed_as if verdict else "",
        "op_on_cpu": bool(ops_under_test_on_cpu(case, execution.fallback_ops)),
        "not_fused_reason": execution.not_fused_reason,
        **{name: execution.info.get(name) for name in PROVENANCE_COLUMNS},
        "core_version": execution.info.get("core_version") or case.core_version or None,
        "device_error": device_error,
        "reference_error": reference_error,
        "error_ratio": _ratio(device_error, reference_error),
        "worst": "; ".join(f"{index}: {a:.6g} vs {e:.6g}" for index, a, e in verdict.worst) if verdict else "",
    }


def _ratio(device_error: float | None, reference_error: float | None) -> float | None:
    if device_error is None or reference_error is None:
        return None
    if reference_error == 0:
        return 0.0 if device_error == 0 else math.inf
    return device_error / reference_error


def _one_line(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    site = f" ({where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{site}".replace("\n", " ")[:500]
