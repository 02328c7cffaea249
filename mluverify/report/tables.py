"""Summary tables computed from the records frame (one row per comparison).

Every number a report shows is computed here (or in ``diff``/``audit``/``gate``), never in a
renderer. Group keys are op x target x dtype x quantization (int8 and int16 errors differ by
orders of magnitude), plus the judged metric so that values of different metrics (e.g.
``rel_mse`` and bit-exact) are never pooled. Each status is counted
apart: an errored case is not a failed one, a case that did not run on the device is neither.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Mapping

# Every record status, most severe first: the order reports list cases in.
from mluverify.core.status import STATUSES
from mluverify.report.completeness import RunCompleteness, completeness_of

if TYPE_CHECKING:
    import pandas as pd

GROUP = ["op", "target", "dtype", "quant", "metric"]
# A case is one comparison of one test on one target; pytest node ids are unique per test.
CASE_KEY = ["case_id", "target"]
# Statuses whose value says the device got it wrong (or could not run it).
FAILING = ("errored", "failed")
WORST_COLUMNS = [
    "status", "case_id", "op", "target", "dtype", "shape", "metric", "value", "bound", "headroom",
    "reason", "error", "seed", "reproducer",
]
# The case list: columns its table shows, then the ones its detail view adds.
CASE_COLUMNS = ["status", "case_id", "op", "target", "dtype", "shape", "metric", "value", "bound",
                "headroom", "executed_as", "fallback_ops", "reason"]
DETAIL_COLUMNS = [
    "error", "waiver_reason", "waiver_until", "task_metric", "task_value", "task_reference", "task_threshold",
    "task_samples", "kind", "leaf", "worst", "rel_mse", "raw_rel_mse", "eps_zeroed", "rae", "rma", "max_abs", "max_rel",
    "cosine", "sqnr_db", "ulp_max", "ulp_p99", "tolerance_metric", "tolerance_bound", "tolerance_source",
    "extra_metrics", "nan_mismatch", "op_on_cpu", "not_fused_reason", "device_impl", "backend",
    "mode", "core_version", "core_number", "quant", "device_error", "reference_error",
    "error_ratio", "compile_s", "graph_breaks", "recompiles", "duration_s", "seed", "model",
    "call_site", "suite", "run_id", "reproducer", "dump", "dump_diff",
]
# ``session`` appends "; dump: <dir>" to a dumped case's reproducer (``--mlu-dump=fail``).
_DUMP_SUFFIX = re.compile(r";\s*dump:\s*(?P<path>.+?)\s*$")
DUMPS_DIR = "dumps"


def status_rank(status: "pd.Series") -> "pd.Series":
    """Position of each status in ``STATUSES`` (unknown statuses after all known ones)."""
    return status.map({name: rank for rank, name in enumerate(STATUSES)}).fillna(len(STATUSES))


def summarize(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Per op x target x dtype x metric: cases, the worst status present (first in
    ``STATUSES``), one count per status, pass rate (passed / cases), median / p99 / max of the
    judged metric, bound (the largest, should a group hold several), minimum headroom (from the
    raw value where the eps rule zeroed it), cases with CPU fallbacks. ``eps_zeroed`` counts the cases whose rel_mse Cambricon's eps rule
    judged 0, and ``raw_max`` is the largest value without that rule (the raw rel_mse of those
    cases, the judged value of the others): a group whose median and max are 0 is exact only
    where ``raw_max`` is 0 too. Lowest pass rate first."""
    import numpy as np

    zeroed = _eps_zeroed(frame)
    work = frame.assign(
        fell_back=frame["fallback_ops"].fillna("").astype(str).str.len() > 0,
        eps_zeroed=zeroed,
        raw_value=frame["value"].where(~zeroed, frame["raw_rel_mse"]),
        # an eps-zeroed 0 has infinite headroom: the raw error says how close to the bound it is
        raw_headroom=frame["headroom"].where(~zeroed, frame["bound"] / frame["raw_rel_mse"]),
        **{status: frame["status"] == status for status in STATUSES},
    )
    groups = work.groupby(GROUP, sort=True, dropna=False)
    summary = groups.agg(
        cases=("status", "size"),
        **{status: (status, "sum") for status in STATUSES},
        median=("value", "median"),
        max=("value", "max"),
        raw_max=("raw_value", "max"),
        eps_zeroed=("eps_zeroed", "sum"),
        bound=("bound", "max"),
        min_headroom=("raw_headroom", "min"),
        fallbacks=("fell_back", "sum"),
    )
    present = summary[list(STATUSES)].to_numpy() > 0
    summary.insert(1, "worst", np.where(present.any(axis=1), np.array(STATUSES)[present.argmax(axis=1)], ""))
    summary.insert(summary.columns.get_loc("median"), "pass_rate", summary["passed"] / summary["cases"])
    summary.insert(summary.columns.get_loc("max"), "p99", groups["value"].quantile(0.99))
    return summary.reset_index().sort_values(["pass_rate", *GROUP], kind="stable").reset_index(drop=True)


def _eps_zeroed(frame: "pd.DataFrame") -> "pd.Series":
    """Per record: the eps rule turned a non-zero rel_mse into the judged 0."""
    return frame["eps_zeroed"].fillna(False).astype(bool) & frame["raw_rel_mse"].notna()


def pass_matrix(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Pass rate (0..1, passed / cases) with ops as rows and ``target dtype`` as columns; NaN
    where an op has no case there."""
    passed = frame["status"] == "passed"
    column = frame["target"].fillna("") + " " + frame["dtype"].fillna("")
    return passed.groupby([frame["op"], column.rename("target dtype")]).mean().unstack("target dtype")


def error_points(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Per comparison: op, target, dtype, status and ``ratio`` = judged metric / bound (1 = at
    the bound). The ratio is NaN without a value (errored, not run), 0 for an exact result
    under a zero bound and inf for a broken one."""
    import numpy as np

    points = frame[["op", "target", "dtype", "status"]].copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = frame["value"].to_numpy(dtype=float) / frame["bound"].to_numpy(dtype=float)
    exact_zero = (frame["value"] == 0) & (frame["bound"] == 0)
    points["ratio"] = np.where(exact_zero.to_numpy(), 0.0, ratio)
    return points.reset_index(drop=True)


def failures_first(frame: "pd.DataFrame") -> "pd.DataFrame":
    """``frame``'s rows in ``STATUSES`` order, then by smallest headroom (stable otherwise)."""
    order = frame.assign(_rank=status_rank(frame["status"]))
    order = order.sort_values(["_rank", "headroom"], na_position="first", kind="stable")
    return order.drop(columns="_rank")


def worst_cases(frame: "pd.DataFrame", n: int = 20) -> "pd.DataFrame":
    """The ``n`` worst comparisons: in ``STATUSES`` order (most severe first), then the
    smallest headroom."""
    return failures_first(frame).head(n)[WORST_COLUMNS].reset_index(drop=True)


def dump_dir(reproducer: Any) -> str:
    """The case's dump as a path relative to its run directory (``dumps/<case>``), or ``""``.

    Only the last two parts of the recorded path are used: a run directory may have moved
    (or been swapped in atomically) since the dump was written.
    """
    found = _DUMP_SUFFIX.search(reproducer) if isinstance(reproducer, str) else None
    if found is None:
        return ""
    path = PurePath(found["path"])
    return f"{DUMPS_DIR}/{path.name}" if path.parent.name == DUMPS_DIR else ""


def case_list(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Every comparison, failures first (``failures_first``): ``CASE_COLUMNS`` then
    ``DETAIL_COLUMNS``; ``dump`` is the case's dump directory relative to the run (or ""),
    ``dump_diff`` its dump-diff page, left for the writer that makes it to fill in;
    ``reproducer`` without the dump's path (a command to copy and run)."""
    cases = failures_first(frame)
    cases = cases.assign(dump=cases["reproducer"].map(dump_dir), dump_diff="",
                         reproducer=cases["reproducer"].str.replace(_DUMP_SUFFIX, "", regex=True))
    return cases[CASE_COLUMNS + DETAIL_COLUMNS].reset_index(drop=True)


WAIVER_COLUMNS = ["status", "case_id", "target", "value", "bound", "waiver_reason", "waiver_until", "reason"]
TASK_COLUMNS = ["status", "case_id", "target", "core_version", "dtype", "quant", "task_metric", "task_value",
                "task_reference", "task_threshold", "task_samples", "task_alpha", "task_beta", "task_effect"]


def waived_cases(frame: "pd.DataFrame") -> "pd.DataFrame":
    """The comparisons a waiver concerned (waived, or failing on an expired waiver): its reason
    and expiry beside the record's own reason, most severe first."""
    concerned = frame[frame["waiver_reason"].notna() | (frame["status"] == "waived")]
    return failures_first(concerned)[WAIVER_COLUMNS].reset_index(drop=True)


def task_cases(frame: "pd.DataFrame") -> "pd.DataFrame":
    """The comparisons that declared a task metric (``mluverify.core.task``): value, reference,
    threshold, samples and error budget, most severe first."""
    return failures_first(frame[frame["task_metric"].notna()])[TASK_COLUMNS].reset_index(drop=True)


def case_outcomes(frame: "pd.DataFrame") -> "pd.DataFrame":
    """One row per case (``CASE_KEY``), indexed by it: a case with several records passes only
    if all passed, and keeps its worst value, tightest bound and a failure's reason and error."""
    columns = CASE_KEY + ["op", "dtype", "metric", "value", "bound", "passed", "waived", "reason", "error"]
    cases = frame[columns].assign(
        passed=frame["passed"].fillna(False).astype(bool),
        waived=frame["waived"].fillna(False).astype(bool),
        reason=frame["reason"].fillna("").astype(str),
        error=frame["error"].fillna("").astype(str),
    )
    if not cases.duplicated(CASE_KEY).any():
        return cases.set_index(CASE_KEY)
    # failing records first, so "first" keeps a failure's reason and error
    cases = cases.sort_values("passed", kind="stable")
    return cases.groupby(CASE_KEY, sort=False).agg(
        op=("op", "first"), dtype=("dtype", "first"), metric=("metric", "first"),
        value=("value", "max"), bound=("bound", "min"), passed=("passed", "all"),
        waived=("waived", "any"), reason=("reason", "first"), error=("error", "first"),
    )


def totals(frame: "pd.DataFrame") -> "pd.DataFrame":
    """One row: records, cases, one count per status (``STATUSES``), comparisons with fallbacks."""
    import pandas as pd

    counts = frame["status"].value_counts()
    return pd.DataFrame([{
        "records": len(frame),
        "cases": len(frame.drop_duplicates(CASE_KEY)),
        **{status: int(counts.get(status, 0)) for status in STATUSES},
        "with_fallbacks": int(frame["fallback_ops"].fillna("").astype(str).str.len().gt(0).sum()),
    }])


def overview(frame: "pd.DataFrame", metadata: Mapping[str, Any]) -> "pd.DataFrame":
    """The run's metadata (``run.json``) and what its records say about it, as ``item, value``
    rows: versions, targets, core versions, machine, times, seeds, command."""
    import pandas as pd

    def distinct(column: str, missing: str) -> str:
        values = frame[column].astype(object).where(frame[column].notna() & (frame[column] != ""), missing)
        return ", ".join(sorted(map(str, values.unique()))) or "none"

    seeds = frame["seed"].dropna()
    seed_text = (f"per case: {seeds.nunique()} distinct, {int(seeds.min())}..{int(seeds.max())}"
                 if len(seeds) else "none recorded")
    rows = [
        ("run", metadata.get("run_id", "")),
        ("mluverify", metadata.get("mluverify_version", "")),
        ("torch", metadata.get("torch_version", "")),
        ("Python", metadata.get("python_version", "")),
        ("targets", distinct("target", "")),
        ("core versions", distinct("core_version", "default")),
        ("device implementations", distinct("device_impl", "not recorded")),
        ("machine", ", ".join(filter(None, (metadata.get("host"), metadata.get("machine"), metadata.get("platform"))))),
        ("started", metadata.get("started", "")),
        ("duration", _duration(metadata, frame)),
        ("seeds", seed_text),
        ("command", metadata.get("command", "")),
        ("git revision", metadata.get("git_revision", "")),
    ]
    return pd.DataFrame(rows, columns=["item", "value"])


def _duration(metadata: Mapping[str, Any], frame: "pd.DataFrame") -> str:
    """Wall clock from ``started`` to ``finished``, or the sum of the case times without both."""
    from datetime import datetime

    try:
        seconds = (datetime.fromisoformat(metadata["finished"]) - datetime.fromisoformat(metadata["started"])).total_seconds()
        return f"{seconds:.0f} s"
    except (KeyError, TypeError, ValueError):
        return f"{frame['duration_s'].sum():.1f} s in cases (run end not recorded)"


@dataclass(frozen=True)
class RunTables:
    """Everything a run's report shows, computed once from its records frame and metadata."""

    totals: "pd.DataFrame"
    summary: "pd.DataFrame"
    matrix: "pd.DataFrame"
    points: "pd.DataFrame"
    cases: "pd.DataFrame"
    worst: "pd.DataFrame"
    overview: "pd.DataFrame"
    waivers: "pd.DataFrame"
    completeness: RunCompleteness = RunCompleteness(True)
    tasks: "pd.DataFrame | None" = None  # task_cases: None when not computed
    corrupt: tuple[str, ...] = ()  # the shard lines that held no record (run.json)


def run_tables(frame: "pd.DataFrame", metadata: Mapping[str, Any] | None = None, worst: int = 20) -> RunTables:
    """The tables of a run's report (see ``RunTables``)."""
    from mluverify.report.records import CORRUPT_KEY

    metadata = metadata or {}
    return RunTables(totals(frame), summarize(frame), pass_matrix(frame), error_points(frame),
                     case_list(frame), worst_cases(frame, worst), overview(frame, metadata),
                     waived_cases(frame), completeness_of(metadata, frame), task_cases(frame),
                     tuple(metadata.get(CORRUPT_KEY, ())))
