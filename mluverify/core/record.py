"""The record: one row per comparison, typed. Its fields are the columns of the records files.

Each field carries its column's pyarrow type (``pyarrow.<name>()``) in its metadata;
``mluverify.report.records`` derives its column list and schema from them and does the file
I/O. ``make_record`` builds a record from a verdict and how the case ran.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from mluverify.core.case import Case
from mluverify.core.status import WAIVED
from mluverify.judge import GOLDEN, METRIC_NAMES, RAW_AND_ULP_METRICS

if TYPE_CHECKING:
    from mluverify.core.backends import Execution
    from mluverify.core.expectations import Waiver
    from mluverify.core.task import TaskResult
    from mluverify.judge import Tolerance, Verdict

_NO_DEFAULT: Any = object()


def _column(arrow_type: str, default: Any = _NO_DEFAULT) -> Any:
    """A record field stored as ``pyarrow.<arrow_type>()``."""
    if default is _NO_DEFAULT:
        return field(metadata={"arrow": arrow_type})
    return field(default=default, metadata={"arrow": arrow_type})


@dataclass(frozen=True, kw_only=True)
class Record:
    """One comparison, as written to the run's records (field order = column order)."""

    run_id: str = _column("string")
    case_id: str = _column("string")
    suite: str = _column("string")
    op: str = _column("string")
    target: str = _column("string")
    backend: str = _column("string")
    mode: str = _column("string")
    dtype: str = _column("string")
    quant: str = _column("string")
    shape: str = _column("string")
    metric: str = _column("string")              # the judged metric ("" when the case errored)
    value: float = _column("float64")            # its value (NaN when the case errored)
    bound: float = _column("float64")
    passed: bool = _column("bool_")              # the verdict: value within bound
    headroom: float = _column("float64")         # bound / value
    rel_mse: float | None = _column("float64")   # every built-in metric (None when not computed)
    rae: float | None = _column("float64")
    rma: float | None = _column("float64")
    max_abs: float | None = _column("float64")
    max_rel: float | None = _column("float64")
    cosine: float | None = _column("float64")
    sqnr_db: float | None = _column("float64")
    extra_metrics: str = _column("string")       # plugin metrics, a JSON object ("" for none)
    nan_mismatch: int = _column("int64")
    fallback_ops: str = _column("string")        # the ops that ran as CPU fallbacks, comma-separated
    seed: int | None = _column("int64")
    reproducer: str = _column("string")
    duration_s: float = _column("float64")
    reason: str = _column("string")
    error: str = _column("string")
    waived: bool = _column("bool_")
    # --- schema version 2: status and provenance (how the case really ran) ---
    status: str = _column("string")              # mluverify.core.status.STATUSES
    kind: str = _column("string")                # what was compared: "output", "grad", "param" or "group"
    leaf: str = _column("string")                # the output (gradient, fusion group output) judged, "" for a single tensor
    executed_as: str = _column("string")         # device | fused | partially fused | layer-by-layer
    op_on_cpu: bool = _column("bool_")           # the op under test itself ran as a CPU fallback
    not_fused_reason: str = _column("string")    # why a fused target ran (partly) layer by layer
    device_impl: str | None = _column("string")  # which implementation ran: "emulator", "torch_mlu", "cuda", ...
    core_version: str | None = _column("string")
    core_number: int | None = _column("int64")
    device_error: float | None = _column("float64")     # golden reference: the device's error against float64
    reference_error: float | None = _column("float64")  # golden reference: the CPU float32 result's own error
    error_ratio: float | None = _column("float64")      # device_error / reference_error
    compile_s: float | None = _column("float64")        # compiled targets: time spent compiling (not in duration_s)
    graph_breaks: int | None = _column("int64")
    recompiles: int | None = _column("int64")
    model: str | None = _column("string", None)         # captured cases: the model and the call site they came from
    call_site: str | None = _column("string", None)
    # --- schema version 3 ---
    worst: str = _column("string")               # the worst elements of a failed comparison: "index: actual vs expected; ..."
    # --- schema version 4: raw values, ULPs and the case's resolved tolerance ---
    raw_rel_mse: float | None = _column("float64", None)  # rel_mse without Cambricon's eps rule
    eps_zeroed: bool | None = _column("bool_", None)      # the eps rule zeroed the judged rel_mse, not the data
    ulp_max: float | None = _column("float64", None)      # ULPs (case dtype) off the golden result; None without one
    ulp_p99: float | None = _column("float64", None)
    tolerance_metric: str | None = _column("string", None)   # the case's resolved tolerance ("golden": the golden rule)
    tolerance_bound: float | None = _column("float64", None)
    tolerance_source: str | None = _column("string", None)   # marker, hook ("user"), config:<key> or policy:<mode>
    waiver_reason: str | None = _column("string", None)      # the waiver of a case that did not pass: why,
    waiver_until: str | None = _column("string", None)       # and until when (YYYY-MM-DD)
    # --- schema version 5: the task metric of a case that declares one (mluverify.core.task) ---
    task_metric: str | None = _column("string", None)        # "accuracy" or "top1_agreement"
    task_value: float | None = _column("float64", None)      # its share right on the target
    task_reference: float | None = _column("float64", None)  # the reference for the model x dtype x quant
    task_threshold: float | None = _column("float64", None)  # the gate: below it the case fails
    task_samples: int | None = _column("int64", None)
    task_alpha: float | None = _column("float64", None)      # the error budget the threshold comes from:
    task_beta: float | None = _column("float64", None)       # false alarm and miss rates,
    task_effect: float | None = _column("float64", None)     # and the (absolute) drop it must catch

    def as_row(self) -> dict[str, Any]:
        """The record as a row: column name -> value, in column order."""
        return {name: getattr(self, name) for name in COLUMN_TYPES}  # not fields(): twice per record


# column -> pyarrow type factory name (pyarrow.<name>()), in column order.
COLUMN_TYPES: dict[str, str] = {column.name: column.metadata["arrow"] for column in fields(Record)}
# Columns a back end may fill through ``Execution.info`` (see mluverify.core.backends).
PROVENANCE_COLUMNS = ("device_impl", "core_version", "core_number", "compile_s", "graph_breaks", "recompiles")


def make_record(run_id: str, case: Case, verdict: Verdict | None, execution: Execution, duration_s: float, *,
                status: str, why: str = "", error: str = "", kind: str = "output",
                ops_on_cpu: tuple[str, ...] = (), waiver: Waiver | None = None,
                task: TaskResult | None = None) -> Record:
    """The record of one comparison: ``verdict`` None for a case that errored (``error``);
    ``ops_on_cpu``: the fallbacks that computed the op under test (``mluverify.core.provenance``);
    ``waiver``: the waiver that matched a case that did not pass (live: ``waived``, or expired);
    ``task``: the case's task metric, measured."""
    diagnostics = dict(verdict.diagnostics) if verdict else {}
    extra = {k: v for k, v in diagnostics.items() if k not in METRIC_NAMES + RAW_AND_ULP_METRICS}
    device_error = verdict.device_error if verdict else None
    reference_error = verdict.reference_error if verdict else None
    reason = verdict.reason if verdict else ""
    provenance = {name: execution.info.get(name) for name in PROVENANCE_COLUMNS}
    return Record(
        run_id=run_id,
        case_id=case.case_id,
        suite=case.suite,
        op=case.op,
        target=str(case.target),
        backend=case.backend,
        mode=case.mode,
        dtype=case.dtype,
        quant=case.quant,
        shape=case.shape,
        metric=verdict.metric if verdict else "",
        value=verdict.value if verdict else math.nan,
        bound=verdict.bound if verdict else math.nan,
        passed=bool(verdict and verdict.passed),
        headroom=verdict.headroom if verdict else 0.0,
        **{name: diagnostics.get(name) for name in METRIC_NAMES},
        extra_metrics=json.dumps(extra) if extra else "",
        nan_mismatch=verdict.nan_mismatch if verdict else 0,
        fallback_ops=",".join(execution.fallback_ops),
        seed=case.seed,
        reproducer=case.reproducer,
        duration_s=duration_s,
        reason=f"{why}; {reason}" if why and reason and why != error else (reason or why),
        error=error,
        waived=status == WAIVED,
        status=status,
        kind=kind,
        leaf=verdict.leaf if verdict else "",
        executed_as=execution.executed_as if verdict else "",
        op_on_cpu=bool(ops_on_cpu),
        not_fused_reason=execution.not_fused_reason,
        **(provenance | {"core_version": provenance["core_version"] or case.core_version or None}),
        device_error=device_error,
        reference_error=reference_error,
        error_ratio=_ratio(device_error, reference_error),
        waiver_reason=waiver.reason if waiver else None,
        waiver_until=waiver.until.isoformat() if waiver else None,
        worst="; ".join(f"{index}: {a:.6g} vs {e:.6g}" for index, a, e in verdict.worst) if verdict else "",
        **{name: diagnostics.get(name) for name in RAW_AND_ULP_METRICS},
        eps_zeroed=verdict.eps_zeroed if verdict and verdict.metric == "rel_mse" else None,
        **_tolerance_columns(verdict.tolerance if verdict else None),
        **_task_columns(task),
    )


def _task_columns(task: TaskResult | None) -> dict[str, Any]:
    """The record's ``task_*`` columns (None: all null)."""
    if task is None:
        return {}
    gate = task.gate
    return {"task_metric": task.metric, "task_value": task.value, "task_reference": gate.reference,
            "task_threshold": gate.threshold, "task_samples": gate.samples, "task_alpha": gate.budget.alpha,
            "task_beta": gate.budget.beta, "task_effect": gate.effect}


def _tolerance_columns(tolerance: Tolerance | None) -> dict[str, Any]:
    """The record's ``tolerance_*`` columns of a resolved tolerance (None: all null)."""
    if tolerance is None:
        return {}
    return {"tolerance_metric": GOLDEN if tolerance.golden else tolerance.metric,
            "tolerance_bound": tolerance.bound, "tolerance_source": tolerance.source}


def _ratio(device_error: float | None, reference_error: float | None) -> float | None:
    if device_error is None or reference_error is None:
        return None
    if reference_error == 0:
        return 0.0 if device_error == 0 else math.inf
    return device_error / reference_error
