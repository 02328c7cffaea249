"""Regression diff of two runs: per-case status and per-group deltas of the judged metric.

A case is *ok* when its status (``mluverify.core.status``) is one of ``ok_statuses`` (``passed``;
the gate adds the statuses ``[tool.mluverify] allow`` admits). Values are compared after
clamping both to the noise floor, so noise-level errors neither worsen nor improve: a case
worsened when ``max(new, floor) > factor * max(base, floor)`` and improved when
``max(base, floor) > factor * max(new, floor)``; ``grew`` says the same of every case with a
value in both runs, failing ones included (a waived case that keeps failing must not grow
unseen). Values of different metrics are never compared. With the spread of repeated baseline
runs (``mluverify.report.spread``) a noisy case's limit widens to ``mean + sigmas x spread``
when that is larger than ``factor x max(base, floor)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mluverify.report.tables import CASE_KEY, GROUP, case_outcomes
from mluverify.core.status import PASSED, STATUSES as RECORD_STATUSES

if TYPE_CHECKING:
    import pandas as pd

    from mluverify.report.spread import Spread

# Status of a case, in the order reports list them; the first three fail `mluverify diff`.
STATUSES = ("new failure", "worsened", "missing", "still failing", "fixed", "improved", "added", "unchanged")
REGRESSIONS = ("new failure", "worsened", "missing")


@dataclass(frozen=True)
class RunDiff:
    """The diff of two runs. ``cases`` has one row per case in either run (``CASE_KEY`` columns,
    op/dtype/metric, ``value_base``/``value_new``, ``passed_base``/``passed_new``, ``ratio``,
    ``status``); ``groups`` the per op x target x dtype x metric medians and maxima."""

    cases: "pd.DataFrame"
    groups: "pd.DataFrame"

    def counts(self) -> dict[str, int]:
        """Number of cases per status, every status present (zero when none)."""
        found = self.cases["status"].value_counts()
        return {status: int(found.get(status, 0)) for status in STATUSES}

    @property
    def regressed(self) -> bool:
        """Whether any case is a new failure, worsened or missing."""
        return bool(self.cases["status"].isin(REGRESSIONS).any())


def diff_runs(base: "pd.DataFrame", new: "pd.DataFrame", *, regress_factor: float = 1.5,
              noise_floor: float = 1e-6, spread: "Spread | None" = None) -> RunDiff:
    """Compare two records frames case by case (see the module docstring for the rules)."""
    return RunDiff(
        cases=compare_cases(base, new, regress_factor=regress_factor, noise_floor=noise_floor, spread=spread),
        groups=group_deltas(base, new),
    )


def compare_cases(base: "pd.DataFrame", new: "pd.DataFrame", *, regress_factor: float,
                  noise_floor: float, ok_statuses: tuple[str, ...] = (PASSED,),
                  spread: "Spread | None" = None) -> "pd.DataFrame":
    """One row per case of either run, with its status (one of ``STATUSES``), each run's record
    status (``record_status_base`` / ``_new``), the ``limit`` above which it is worsened and
    whether its value ``grew`` beyond it (``spread_mean`` / ``spread`` / ``spread_runs``: the
    baseline runs' spread that set the limit, NaN where the fixed factor did)."""
    import numpy as np

    merged = case_outcomes(base).join(case_outcomes(new), how="outer", suffixes=("_base", "_new"))
    merged = merged.join(_record_statuses(base).rename("record_status_base"))
    merged = merged.join(_record_statuses(new).rename("record_status_new"))
    in_base, in_new = merged["passed_base"].notna(), merged["passed_new"].notna()
    ok_base = merged["record_status_base"].isin(ok_statuses)
    ok_new = merged["record_status_new"].isin(ok_statuses)
    same_metric = in_base & in_new & (merged["metric_base"] == merged["metric_new"])
    floor_base = merged["value_base"].clip(lower=noise_floor)
    floor_new = merged["value_new"].clip(lower=noise_floor)
    merged["limit"] = regress_factor * floor_base
    merged = _noise_limits(merged, spread)
    merged["grew"] = same_metric & (floor_new > merged["limit"])
    comparable = same_metric & ok_base & ok_new
    conditions = [
        in_base & ~in_new,
        ~in_base & in_new,
        ok_base & ~ok_new,
        ~ok_base & ~ok_new,
        ~ok_base & ok_new,
        comparable & merged["grew"],
        comparable & (floor_base > regress_factor * floor_new),
    ]
    choices = ["missing", "added", "new failure", "still failing", "fixed", "worsened", "improved"]
    merged["status"] = np.select(conditions, choices, default="unchanged")
    merged["ratio"] = merged["value_new"] / merged["value_base"]
    for column in ("op", "dtype", "metric"):
        merged[column] = merged[f"{column}_new"].fillna(merged[f"{column}_base"])
    columns = ["op", "dtype", "metric", "status", "value_base", "value_new", "ratio", "grew", "limit",
               "spread_mean", "spread", "spread_runs",
               "bound_new", "passed_base", "passed_new", "record_status_base", "record_status_new",
               "waived_new", "reason_new", "error_new"]
    return merged[columns].reset_index()


def _noise_limits(merged: "pd.DataFrame", spread: "Spread | None") -> "pd.DataFrame":
    """``merged`` with each case's limit widened to its baseline runs' ``mean + sigmas x
    spread`` where that is larger (never tighter), and the spread that did it."""
    import numpy as np

    if spread is None:
        return merged.assign(spread_mean=np.nan, spread=np.nan, spread_runs=np.nan)
    measured = spread.limits(merged["metric_base"])
    widens = measured["limit"].to_numpy() > merged["limit"].to_numpy()
    merged["limit"] = np.where(widens, measured["limit"], merged["limit"])
    for column, source in (("spread_mean", "mean"), ("spread", "spread"), ("spread_runs", "runs")):
        merged[column] = np.where(widens, measured[source], np.nan)
    return merged


def _record_statuses(frame: "pd.DataFrame") -> "pd.Series":
    """Per case (``CASE_KEY``) its most severe record status (``mluverify.core.status.STATUSES``)."""
    severity = {name: rank for rank, name in enumerate(RECORD_STATUSES)}
    ranked = frame.assign(_rank=frame["status"].map(severity).fillna(-1))
    worst = ranked.sort_values("_rank", kind="stable").drop_duplicates(CASE_KEY)
    return worst.set_index(CASE_KEY)["status"]


def group_deltas(base: "pd.DataFrame", new: "pd.DataFrame") -> "pd.DataFrame":
    """Per op x target x dtype x metric: cases, median and max of the judged metric in each run,
    and the change of the median (``new - base``) and of the max (``new / base``)."""
    def stats(frame: "pd.DataFrame") -> "pd.DataFrame":
        return frame.groupby(GROUP, dropna=False)["value"].agg(["size", "median", "max"])

    groups = stats(base).join(stats(new), how="outer", suffixes=("_base", "_new"))
    groups = groups.rename(columns={"size_base": "cases_base", "size_new": "cases_new"})
    groups["median_delta"] = groups["median_new"] - groups["median_base"]
    groups["max_ratio"] = groups["max_new"] / groups["max_base"]
    return groups.reset_index()
