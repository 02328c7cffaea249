"""Tolerance audit: across one or more runs, is each op's bound where the observed errors are?

Per op x target x dtype x metric: observed quantiles of the judged metric, the bound, the
headroom ``bound / max observed``, a recommended bound and a verdict:

- ``too tight``: a case failed, or headroom < ``TIGHT_HEADROOM`` (1.2): noise alone may fail it;
- ``too loose``: headroom > ``LOOSE_HEADROOM`` (100): a real regression would still pass;
- ``ok`` otherwise (also for bit-exact groups, whose headroom 0 / 0 is undefined).

The recommended bound is the maximum observed value times the safety factor, rounded *up* to
``SIGNIFICANT_DIGITS`` (2) significant digits: 0.001234 x 2 = 0.002468 -> 0.0025.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from mluverify.report.tables import GROUP

if TYPE_CHECKING:
    import pandas as pd

TIGHT_HEADROOM = 1.2
LOOSE_HEADROOM = 100.0
SIGNIFICANT_DIGITS = 2
DEFAULT_SAFETY_FACTOR = 2.0
WORST_COLUMNS = GROUP + ["run_id", "case_id", "shape", "value", "bound", "passed", "seed", "reproducer"]


@dataclass(frozen=True)
class Audit:
    """``groups``: one row per op x target x dtype x metric with quantiles, bound, headroom,
    ``recommended_bound`` and ``verdict``; ``worst``: the worst inputs of each group."""

    groups: "pd.DataFrame"
    worst: "pd.DataFrame"


def audit_runs(frames: Sequence["pd.DataFrame"], *, safety_factor: float = DEFAULT_SAFETY_FACTOR,
               worst_per_group: int = 3) -> Audit:
    """Audit the bounds of the records of every run in ``frames`` taken together."""
    import pandas as pd

    records = pd.concat(list(frames), ignore_index=True)
    return Audit(groups=group_audit(records, safety_factor), worst=worst_inputs(records, worst_per_group))


def group_audit(records: "pd.DataFrame", safety_factor: float) -> "pd.DataFrame":
    """The per-group table of ``Audit.groups``."""
    import numpy as np

    work = records.assign(failed=~records["passed"].fillna(False).astype(bool))
    groups = work.groupby(GROUP, sort=True, dropna=False)
    table = groups.agg(runs=("run_id", "nunique"), cases=("failed", "size"), failed=("failed", "sum"))
    quantiles = groups["value"].quantile([0.5, 0.9, 0.99]).unstack()
    table[["p50", "p90", "p99"]] = quantiles.to_numpy()
    table["max"] = groups["value"].max()
    table["bound"] = groups["bound"].max()
    with np.errstate(divide="ignore", invalid="ignore"):
        table["headroom"] = table["bound"] / table["max"]
    table["recommended_bound"] = round_up(table["max"].to_numpy() * safety_factor)
    table["verdict"] = np.select(
        [(table["failed"] > 0) | (table["headroom"] < TIGHT_HEADROOM), table["headroom"] > LOOSE_HEADROOM],
        ["too tight", "too loose"],
        default="ok",
    )
    return table.reset_index()


def round_up(values, digits: int = SIGNIFICANT_DIGITS):
    """``values`` rounded up to ``digits`` significant digits (zero and non-finite kept)."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    positive = np.isfinite(values) & (values > 0)
    safe = np.where(positive, values, 1.0)
    exponent = np.floor(np.log10(safe)) - digits + 1
    # round() first: 0.0025 / 1e-4 is 24.999999999999996 in binary, which must stay 25
    units = np.ceil(np.round(safe / 10.0**exponent, 9))
    # divide by a power of ten (exact) instead of multiplying by 10**-k (inexact) for clean decimals
    rounded = np.where(exponent < 0, units / 10.0 ** (-exponent), units * 10.0 ** np.maximum(exponent, 0))
    return np.where(positive, rounded, values)


def worst_inputs(records: "pd.DataFrame", per_group: int) -> "pd.DataFrame":
    """The ``per_group`` largest values of each group (errored comparisons, without a value, first)."""
    ordered = records.sort_values("value", ascending=False, na_position="first", kind="stable")
    return ordered.groupby(GROUP, sort=False, dropna=False).head(per_group)[WORST_COLUMNS].sort_values(
        GROUP, kind="stable").reset_index(drop=True)
