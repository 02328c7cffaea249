"""Tolerance audit: across one or more runs, is each op's bound where the observed errors are?

Per op x target x dtype x metric, from the *judged* cases only (status passed, failed or
waived: an errored case, or one that did not run on the device, has no value that says
anything about a bound): observed quantiles, the bound, the headroom ``bound / max passing
raw value``, a recommended bound and a verdict (``VERDICTS``):

- ``exact``: every case of the group is bit-identical (``max_abs == 0``; for the ``exact``
  metric, no element differs): recommend the ``exact`` policy rather than a bound. A judged
  rel_mse of 0 does not qualify: Cambricon's eps rule reports any total squared error up to
  ``(2 eps)^2`` as 0;
- ``failing``: cases fail the bound. The audit never loosens a bound because of a failure:
  the recommendation comes from the passing cases, and ``admits`` lists the failing cases it
  would let through if it is looser than the bound;
- ``too tight``: passing headroom < ``TIGHT_HEADROOM`` (1.2): noise alone may fail it;
- ``too loose``: passing headroom > ``LOOSE_HEADROOM`` (100): a real regression would pass;
- ``ok`` otherwise; ``no data`` when no case was judged.

The headroom (so the verdicts) and the recommended bound come from raw errors: the largest
passing *raw* value (a rel_mse the eps rule zeroed, column ``eps_zeroed``, is replaced by the
record's ``raw_rel_mse``; records older than schema version 4 get both from ``sqnr_db`` when
loaded; the other metrics have no eps rule). The headroom is the bound over it; the
recommendation is it times the safety factor, never below the largest golden
``reference_error`` of the group (what the CPU reference itself misses by), rounded *up* to
``SIGNIFICANT_DIGITS`` (2) significant digits: 0.001234 x 2 = 0.002468 -> 0.0025. Beside it,
``eps_zeroed`` counts the cases whose judged rel_mse the eps rule turned to 0 though the raw
one is not, and ``max_passing`` keeps the largest judged value. ``admits`` lists every failing
case whose judged value the recommended bound would let through.

Asked with known-bad variants (``separation``: the records of runs that must fail, e.g. with
planted bugs), the audit also says per op x target x dtype which metric separates the passing
cases from the bad ones best (``SEPARATING_METRICS``: raw rel_mse, the other pair metrics, ULPs):
for each, the bound a passing-case policy would set (largest passing value x safety factor,
rounded up as above) and the share of bad cases above it; the best is the one catching the most
(ties: the first in ``SEPARATING_METRICS``).

A failing case with a golden (float64) result is blamed on the device when the device's own
error breaks the golden rule (``device_error > k * reference_error + floor``), and on an
ill-conditioned reference when it does not: the CPU's float32 result is itself that far off.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from mluverify.judge import GOLDEN_RULES, GoldenRule
from mluverify.report.tables import GROUP

if TYPE_CHECKING:
    import pandas as pd

TIGHT_HEADROOM = 1.2
LOOSE_HEADROOM = 100.0
SIGNIFICANT_DIGITS = 2
DEFAULT_SAFETY_FACTOR = 2.0
VERDICTS = ("failing", "too tight", "too loose", "exact", "ok", "no data")
JUDGED = ("passed", "failed", "waived")
# Candidates for separating good from known-bad results (record columns; raw values, no eps rule).
SEPARATING_METRICS = ("raw_rel_mse", "rae", "rma", "max_abs", "max_rel", "ulp_max", "ulp_p99")
SEPARATION_GROUP = ["op", "target", "dtype"]
WORST_COLUMNS = GROUP + ["run_id", "case_id", "status", "shape", "value", "bound", "passed", "blame",
                         "device_error", "reference_error", "seed", "reproducer"]
LEGEND = (f"Only judged cases (passed, failed, waived) count. exact: every case bit-identical (max_abs 0), "
          f"use the exact policy; failing: cases fail, the recommendation comes from passing cases only "
          f"and admits lists every failure it would let through; too tight: passing headroom < "
          f"{TIGHT_HEADROOM:g}; too loose: headroom > {LOOSE_HEADROOM:g} (headroom: bound / largest passing "
          f"raw value, the eps rule's zeroing undone). Recommended bound: largest "
          f"passing raw value (rel_mse without the eps rule) x safety factor, at least the golden "
          f"reference_error, rounded up to {SIGNIFICANT_DIGITS} significant digits; eps_zeroed: cases "
          f"the eps rule judged 0 though their raw error is not. "
          f"blame: a failure is the device's when its float64 error breaks the golden rule, the "
          f"reference's (ill-conditioned) when it does not.")


@dataclass(frozen=True)
class Audit:
    """``groups``: one row per op x target x dtype x metric with quantiles, bound, headroom,
    ``recommended_bound``, ``verdict`` and ``admits``; ``worst``: the worst inputs of each group."""

    groups: "pd.DataFrame"
    worst: "pd.DataFrame"


def audit_runs(frames: Sequence["pd.DataFrame"], *, safety_factor: float = DEFAULT_SAFETY_FACTOR,
               worst_per_group: int = 3, golden_rules: Mapping[str, GoldenRule] | None = None) -> Audit:
    """Audit the bounds of the records of every run in ``frames`` taken together."""
    import pandas as pd

    records = pd.concat(list(frames), ignore_index=True)
    records = records.assign(blame=blame(records, golden_rules or GOLDEN_RULES))
    judged = records[records["status"].isin(JUDGED)]
    return Audit(groups=group_audit(judged, safety_factor), worst=worst_inputs(records, worst_per_group))


def blame(records: "pd.DataFrame", rules: Mapping[str, GoldenRule]) -> "pd.Series":
    """Per record: ``device`` or ``reference`` for a failed case with a golden result, else ``""``."""
    import numpy as np

    rule = records["dtype"].map(lambda d: rules.get(d, rules.get("float32", GOLDEN_RULES["float32"])))
    allowed = [r.bound(ref, 1000) if ref == ref else np.nan for r, ref in zip(rule, records["reference_error"])]
    failed = records["status"].isin(["failed", "waived"]) & records["device_error"].notna()
    within = records["device_error"] <= np.asarray(allowed, dtype=float)
    return np.where(failed, np.where(within, "reference", "device"), "")


def group_audit(judged: "pd.DataFrame", safety_factor: float) -> "pd.DataFrame":
    """The per-group table of ``Audit.groups``, from judged records only."""
    import numpy as np

    work = judged.assign(failed=~judged["passed"].fillna(False).astype(bool), raw_value=raw_values(judged),
                         bit_identical=bit_identical(judged))
    work = work.assign(passing_value=work["value"].where(~work["failed"]),
                       passing_raw=work["raw_value"].where(~work["failed"]),
                       eps_zeroed=work["eps_zeroed"].fillna(False).astype(bool))
    groups = work.groupby(GROUP, sort=True, dropna=False)
    table = groups.agg(runs=("run_id", "nunique"), cases=("failed", "size"), failed=("failed", "sum"))
    quantiles = groups["value"].quantile([0.5, 0.9, 0.99]).unstack()
    table[["p50", "p90", "p99"]] = quantiles.to_numpy()
    table["max"] = groups["value"].max()
    table["max_passing"] = groups["passing_value"].max()
    table["bound"] = groups["bound"].max()
    passing_raw = groups["passing_raw"].max()
    # from the raw error: an eps-zeroed 0 under a bound says nothing about how loose it is
    with np.errstate(divide="ignore", invalid="ignore"):
        table["headroom"] = table["bound"] / passing_raw
    table["max_passing_raw"] = passing_raw
    table["eps_zeroed"] = groups["eps_zeroed"].sum()
    from_raw = table["max_passing_raw"].to_numpy() * safety_factor
    # fmax: a group without golden results keeps the raw recommendation
    table["recommended_bound"] = round_up(np.fmax(from_raw, groups["reference_error"].max().to_numpy()))
    table["admits"] = _admitted(work, table)
    all_zero = groups["bit_identical"].all() & (table["failed"] == 0)
    table["verdict"] = np.select(
        [table["max_passing"].isna() & (table["failed"] == 0), table["failed"] > 0, all_zero,
         table["headroom"] < TIGHT_HEADROOM, table["headroom"] > LOOSE_HEADROOM],
        ["no data", "failing", "exact", "too tight", "too loose"],
        default="ok",
    )
    table["recommended_policy"] = np.where(all_zero, "exact", "")
    verdict = table.pop("verdict")
    return table.assign(verdict=verdict).reset_index()


def raw_values(records: "pd.DataFrame") -> "pd.Series":
    """Per record, the judged value with Cambricon's eps zeroing undone: a rel_mse the eps rule
    zeroed (``eps_zeroed``) is replaced by its ``raw_rel_mse``. A non-zero rel_mse keeps the eps
    added to a near-zero reference (without it, a zero reference makes any error infinite);
    other metrics have no eps rule."""
    zeroed = records["eps_zeroed"].fillna(False).astype(bool) & records["raw_rel_mse"].notna()
    return records["raw_rel_mse"].where(zeroed, records["value"])


def bit_identical(records: "pd.DataFrame") -> "pd.Series":
    """Per record, whether the device result equals the reference bit for bit: ``max_abs == 0``,
    or for the ``exact`` metric (the count of differing elements) a value of 0."""
    return (records["max_abs"] == 0) | ((records["metric"] == "exact") & (records["value"] == 0))


def _admitted(work: "pd.DataFrame", table: "pd.DataFrame") -> "pd.Series":
    """Per group, every failing case whose judged value the recommended bound would let
    through were it adopted, as ``case_id (value)`` text."""
    failing = work[work["failed"]].join(table[["recommended_bound"]], on=GROUP)
    admitted = failing[failing["value"] <= failing["recommended_bound"]]
    text = admitted.assign(item=[f"{case} ({value:.3g})" for case, value in zip(admitted["case_id"], admitted["value"])])
    listed = text.groupby(GROUP, dropna=False)["item"].agg(", ".join)
    # object first: with nothing admitted the aggregate is an empty float column
    return listed.astype(object).reindex(table.index).fillna("")


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


def separation(good: "pd.DataFrame", bad: "pd.DataFrame", safety_factor: float = DEFAULT_SAFETY_FACTOR
               ) -> "pd.DataFrame":
    """Per op x target x dtype present in both: for each of ``SEPARATING_METRICS``, the share of
    ``bad``'s judged cases above the bound the passing cases of ``good`` recommend
    (``<metric>_caught``, NaN where either side lacks the metric), and the best metric with its
    bound and share (``best_metric``, ``best_bound``, ``caught``: "bad above / bad cases")."""
    import numpy as np
    import pandas as pd

    passing = good[good["status"].isin(JUDGED) & good["passed"].fillna(False).astype(bool)]
    bad = bad[bad["status"].isin(JUDGED)]
    rows = []
    for key, known_bad in bad.groupby(SEPARATION_GROUP, sort=True, dropna=False):
        ok = passing[(passing[SEPARATION_GROUP] == pd.Series(key, index=SEPARATION_GROUP)).all(axis=1)]
        if ok.empty:
            continue
        row: dict = dict(zip(SEPARATION_GROUP, key), bad_cases=len(known_bad))
        best = (0, "", np.nan)  # (bad cases caught, metric, bound): a metric catching none is no answer
        for metric in SEPARATING_METRICS:
            good_values, bad_values = ok[metric].dropna(), known_bad[metric].dropna()
            if len(good_values) < len(ok) or len(bad_values) < len(known_bad) or bad_values.empty:
                row[f"{metric}_caught"] = np.nan  # not measured everywhere: no policy can rely on it
                continue
            bound = float(round_up(np.array([good_values.max() * safety_factor]))[0])
            caught = int((bad_values > bound).sum())
            row[f"{metric}_caught"] = caught / len(known_bad)
            if caught > best[0]:
                best = (caught, metric, bound)
        row.update(best_metric=best[1], best_bound=best[2],
                   caught=f"{best[0]} / {len(known_bad)}" if best[1] else "")
        rows.append(row)
    columns = SEPARATION_GROUP + ["bad_cases"] + [f"{m}_caught" for m in SEPARATING_METRICS] + \
        ["best_metric", "best_bound", "caught"]
    return pd.DataFrame(rows, columns=columns)


def worst_inputs(records: "pd.DataFrame", per_group: int) -> "pd.DataFrame":
    """The ``per_group`` largest values of each group (errored comparisons, without a value, first)."""
    ordered = records.sort_values("value", ascending=False, na_position="first", kind="stable")
    return ordered.groupby(GROUP, sort=False, dropna=False).head(per_group)[WORST_COLUMNS].sort_values(
        GROUP, kind="stable").reset_index(drop=True)
