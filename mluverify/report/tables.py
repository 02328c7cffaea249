"""Summary tables computed from the records frame (one row per comparison).

Every number a report shows is computed here (or in ``diff``/``audit``/``gate``), never in a
renderer. Group keys are op x target x dtype, plus the judged metric so that values of
different metrics (e.g. ``rel_mse`` and bit-exact) are never pooled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

GROUP = ["op", "target", "dtype", "metric"]
# A case is one comparison of one test on one target; pytest node ids are unique per test.
CASE_KEY = ["case_id", "target"]
WORST_COLUMNS = [
    "case_id", "op", "target", "dtype", "shape", "metric", "value", "bound", "headroom",
    "passed", "reason", "error", "seed", "reproducer",
]


def summarize(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Per op x target x dtype x metric: cases, failed, pass rate, median / p99 / max of the judged
    metric, bound (the largest, should a group hold several), minimum headroom, cases with CPU
    fallbacks."""
    work = frame.assign(
        fell_back=frame["fallback_ops"].fillna("").astype(str).str.len() > 0,
        passed=frame["passed"].fillna(False).astype(bool),
    )
    groups = work.groupby(GROUP, sort=True, dropna=False)
    summary = groups.agg(
        cases=("passed", "size"),
        passed=("passed", "sum"),
        median=("value", "median"),
        max=("value", "max"),
        bound=("bound", "max"),
        min_headroom=("headroom", "min"),
        fallbacks=("fell_back", "sum"),
    )
    summary.insert(summary.columns.get_loc("max"), "p99", groups["value"].quantile(0.99))
    summary.insert(1, "failed", summary["cases"] - summary["passed"])
    summary.insert(2, "pass_rate", summary["passed"] / summary["cases"])
    return summary.drop(columns="passed").reset_index()


def pass_matrix(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Pass rate (0..1) with ops as rows and targets as columns; NaN where an op has no case."""
    passed = frame["passed"].fillna(False).astype(bool)
    return passed.groupby([frame["op"], frame["target"]]).mean().unstack("target")


def worst_cases(frame: "pd.DataFrame", n: int = 20) -> "pd.DataFrame":
    """The ``n`` worst comparisons: failures first (errors before tolerance breaks), then the
    smallest headroom."""
    order = frame.assign(_passed=frame["passed"].fillna(False).astype(bool))
    order = order.sort_values(["_passed", "headroom"], na_position="first", kind="stable")
    return order.head(n)[WORST_COLUMNS].reset_index(drop=True)


def bound_ratios(frame: "pd.DataFrame") -> "pd.DataFrame":
    """Per comparison, the judged metric as a fraction of its bound (1 = at the bound).

    Comparisons without a positive finite bound (bit-exact checks) or without a value
    (errors) have no ratio and are left out.
    """
    usable = frame["bound"].gt(0) & frame["value"].notna() & frame["bound"].lt(float("inf"))
    rows = frame.loc[usable, ["op", "target", "passed"]].copy()
    rows["ratio"] = frame.loc[usable, "value"] / frame.loc[usable, "bound"]
    return rows.reset_index(drop=True)


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
    """One row: records, cases, failed, errored, waived comparisons and comparisons with fallbacks."""
    import pandas as pd

    passed = frame["passed"].fillna(False).astype(bool)
    return pd.DataFrame([{
        "records": len(frame),
        "cases": len(frame.drop_duplicates(CASE_KEY)),
        "failed": int((~passed).sum()),
        "errored": int(frame["error"].fillna("").astype(str).str.len().gt(0).sum()),
        "waived": int(frame["waived"].fillna(False).astype(bool).sum()),
        "with_fallbacks": int(frame["fallback_ops"].fillna("").astype(str).str.len().gt(0).sum()),
    }])


@dataclass(frozen=True)
class RunTables:
    """Everything a run's report shows, computed once from its records frame."""

    totals: "pd.DataFrame"
    summary: "pd.DataFrame"
    matrix: "pd.DataFrame"
    ratios: "pd.DataFrame"
    worst: "pd.DataFrame"


def run_tables(frame: "pd.DataFrame", worst: int = 20) -> RunTables:
    """The tables of a run's report (see ``RunTables``)."""
    return RunTables(totals(frame), summarize(frame), pass_matrix(frame), bound_ratios(frame), worst_cases(frame, worst))
