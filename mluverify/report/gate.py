"""The CI accuracy gate: pure decisions on records frames, findings as data.

Rules (each finding names its rule):

- ``empty run``: the run holds no records; the gate never passes vacuously.
- ``fails tolerance``: a case breaks its tolerance (or errored).
- ``new failure``: a case that passed in the baseline fails now.
- ``worsened``: the judged metric grew by more than the regress factor (see ``diff``).
- ``missing``: a baseline case is absent from the run.
- ``expired waiver``: a ``[tool.mluverify.waivers]`` entry is past its ``until`` date.

A case finding is waived (reported, not blocking) when its record carries the ``mlu_waiver``
marker (``waived``) or an unexpired configured waiver's glob matches its case id.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping


if TYPE_CHECKING:
    import pandas as pd

    from mluverify.config import Waiver

FINDING_COLUMNS = ["rule", "case_id", "target", "op", "value", "baseline_value", "bound", "waiver", "detail"]


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: ``findings`` (``FINDING_COLUMNS``; ``waiver`` empty when blocking)."""

    findings: "pd.DataFrame"

    @property
    def blocking(self) -> "pd.DataFrame":
        """The findings that fail the gate."""
        return self.findings[self.findings["waiver"] == ""]

    @property
    def passed(self) -> bool:
        return self.blocking.empty


def evaluate_gate(run: "pd.DataFrame", baseline: "pd.DataFrame | None" = None, *,
                  regress_factor: float = 1.5, noise_floor: float = 0.0,
                  waivers: "Mapping[str, Waiver] | None" = None, today: dt.date | None = None) -> GateResult:
    """Apply every gate rule to the records of ``run`` (against ``baseline`` when given);
    ``waivers`` maps case-id globs to waivers (``mluverify.config.parse_waivers``)."""
    import pandas as pd

    today, waivers = today or dt.date.today(), waivers or {}
    if run.empty:
        return GateResult(_frame([{"rule": "empty run", "detail": "the run holds no records: nothing was verified"}]))
    cases = case_findings(run, baseline, regress_factor=regress_factor, noise_floor=noise_floor)
    cases["waiver"] = waiver_reasons(cases, waivers, today)
    expired = [
        {"rule": "expired waiver", "case_id": pattern,
         "detail": f"waiver expired on {w.until.isoformat()} (reason: {w.reason}); fix the cases or renew it"}
        for pattern, w in waivers.items() if w.expired(today)
    ]
    return GateResult(pd.concat([cases, _frame(expired)], ignore_index=True))


def case_findings(run: "pd.DataFrame", baseline: "pd.DataFrame | None", *, regress_factor: float,
                  noise_floor: float) -> "pd.DataFrame":
    """Findings of the per-case rules, ``waiver`` not yet filled in."""
    from mluverify.report.diff import compare_cases

    empty = run.iloc[:0] if baseline is None else baseline
    cases = compare_cases(empty, run, regress_factor=regress_factor, noise_floor=noise_floor)
    rule = cases["status"].map({
        "new failure": "new failure",
        "still failing": "fails tolerance",
        "worsened": "worsened",
        "missing": "missing",
    })
    failing_added = (cases["status"] == "added") & ~cases["passed_new"].astype(bool)
    rule = rule.mask(failing_added, "fails tolerance")
    found = cases[rule.notna()].assign(rule=rule[rule.notna()])
    found = found.rename(columns={"value_new": "value", "value_base": "baseline_value", "bound_new": "bound"})
    found["detail"] = found.apply(_detail, axis=1, regress_factor=regress_factor) if len(found) else ""
    found["waiver"] = found["waived_new"].fillna(False).astype(bool).map({True: "mlu_waiver marker", False: ""})
    return found[FINDING_COLUMNS]


def _detail(row: "pd.Series", regress_factor: float) -> str:
    if row["rule"] == "missing":
        return "in the baseline but not in this run"
    if row["rule"] == "worsened":
        return f"{row['value']:.4g} > {regress_factor:g} x baseline {row['baseline_value']:.4g}"
    # the record's own words first: an error message, then the verdict's reason
    if row["error_new"] or row["reason_new"]:
        return row["error_new"] or row["reason_new"]
    return f"{row['value']:.4g} > bound {row['bound']:.4g}"


def waiver_reasons(findings: "pd.DataFrame", waivers: "Mapping[str, Waiver]", today: dt.date) -> "pd.Series":
    """Per finding, the waiver that covers it (marker first, then the first matching unexpired
    configured waiver), or ``""``."""
    from mluverify.config import case_id_regex

    reasons = findings["waiver"].copy()
    for pattern, waiver in waivers.items():
        if waiver.expired(today):
            continue
        matches = findings["case_id"].str.match(case_id_regex(pattern)).fillna(False) & (reasons == "")
        reasons[matches] = f"{pattern}: {waiver.reason} (until {waiver.until.isoformat()})"
    return reasons


def _frame(rows: list[dict[str, Any]]) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame([{"waiver": "", **row} for row in rows], columns=FINDING_COLUMNS)
