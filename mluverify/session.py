"""A verification session: runs cases on targets and on the CPU, judges them and records them.

The pytest plugin and the CLI both drive one ``Session``; nothing here knows pytest.
"""
from __future__ import annotations

import json
import math
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import pluggy

from mluverify.backends import Backend, BackendRegistry, Execution, map_tensors
from mluverify.case import Case, Target
from mluverify.compare import METRIC_NAMES, Tolerance, Verdict, compare, resolve_tolerance
from mluverify.config import Settings, Waiver
from mluverify.plugin_manager import call_hook
from mluverify.report.records import PROVENANCE_COLUMNS, ShardWriter


@dataclass(frozen=True)
class Outcome:
    """A judged and recorded case: the verdict, and whether a waiver excused its failure."""

    verdict: Verdict
    record: Mapping[str, Any]
    waiver: Waiver | None = None

    @property
    def waived(self) -> bool:
        return bool(self.record["waived"])


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
               tolerance: Tolerance | float | None = None, waiver: Waiver | None = None) -> Outcome:
        """Run ``fn`` on the case's target and on the CPU (float32), judge, record, return.

        A device that raises is recorded (with its error) and the exception re-raised.
        """
        _, backend = self.resolve(case.target)
        started = time.perf_counter()
        device_args = cast_floating(args, case.dtype)
        try:
            execution = backend.execute(fn, device_args, dict(kwargs), case=case)
            expected = fn(*args, **kwargs)
            verdict = compare(as_reference_dtype(execution.output, case.dtype), expected,
                              tolerance=self.tolerance(case, tolerance), extra_metrics=self.extra_metrics)
        except Exception as exc:
            self.write(make_record(self.run_id, case, None, Execution(None), time.perf_counter() - started,
                                   error=_one_line(exc)))
            raise
        duration_s = time.perf_counter() - started
        if self.dump_failures and not verdict.passed:
            dumped = self._dump(backend, fn, device_args, kwargs, case)
            case = replace(case, reproducer=f"{case.reproducer}; dump: {dumped}")
        waived = not verdict.passed and waiver is not None and not waiver.expired()
        record = make_record(self.run_id, case, verdict, execution, duration_s, waived=waived)
        self.write(record)
        return Outcome(verdict, record, waiver)

    def _dump(self, backend: Backend, fn: Callable, args: tuple, kwargs: Mapping[str, Any],
               case: Case) -> Path:
        """Re-run a failing case on its target under the Dumper (level 1, CPU re-run of each op)."""
        from mluverify.dump import dump_case

        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.case_id)[-120:]
        return dump_case(lambda: backend.execute(fn, args, dict(kwargs), case=case), (), {},
                         self.run_dir / "dumps" / name)

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
                duration_s: float, *, error: str = "", waived: bool = False) -> dict[str, Any]:
    """One row of the records (see ``mluverify.report.records.COLUMNS``)."""
    diagnostics = dict(verdict.diagnostics) if verdict else {}
    extra = {k: v for k, v in diagnostics.items() if k not in METRIC_NAMES}
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
        "reason": verdict.reason if verdict else "",
        "error": error,
        "waived": waived,
        "status": _status(verdict, error, waived),
        "kind": "output",
        "leaf": verdict.leaf if verdict else "",
        "executed_as": execution.executed_as if verdict else "",
        "not_fused_reason": execution.not_fused_reason,
        **{name: execution.info.get(name) for name in PROVENANCE_COLUMNS},
    }


def _status(verdict: Verdict | None, error: str, waived: bool) -> str:
    if error or verdict is None:
        return "errored"
    if verdict.passed:
        return "passed"
    return "waived" if waived else "failed"


def _one_line(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    site = f" ({where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{site}".replace("\n", " ")[:500]
