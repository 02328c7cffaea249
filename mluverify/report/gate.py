"""The CI accuracy gate: pure decisions on records frames, findings as data.

Rules (each finding names its rule):

- ``empty run``: the run holds no records; the gate never passes vacuously.
- ``fails tolerance``: a case breaks its tolerance; ``errored``: it raised.
- ``task below threshold``: a case's task metric (``mluverify.core.task``: accuracy, top-1
  agreement) fell below the threshold its error budget and sample size give; the finding says
  the test (reference, samples, alpha, power, effect).
- ``not_on_device`` / ``not_fused`` / ``nondeterministic``: the case did not run as it claims
  (``mluverify.core.status``), unless ``[tool.mluverify] allow`` admits the status.
- ``new failure``: a case that was ok in the baseline is not now.
- ``worsened``: the judged metric grew by more than the regress factor, or beyond ``mean +
  sigmas x spread`` of repeated baseline runs where that is wider (see ``diff``, ``spread``).
- ``waived but worsened``: a waived case's metric grew by more than the regress factor over
  its baseline value, or is above the ceiling (``max``, per record kind ``max_by_kind``) of the
  waiver that covers it (when it ran, or a configured one now): a waiver excuses a known
  deviation, not a growing one. Never waived.
- ``missing``: a baseline case is absent from the run (only among the cases the run selected,
  when the caller says which: the test ids a ``-k`` kept, or the paths and node ids the run
  was given; a subset is not a loss).
- ``expired waiver``: a ``[tool.mluverify.waivers]`` entry is past its ``until`` date.
- ``corrupt record``: a shard line of the run was no record (``corrupt``): what it held, a
  failure maybe, is lost.
- ``stale waiver`` (opt-in, ``stale_waivers``): a ``[tool.mluverify.waivers]`` entry covers no
  record of the run, or only passing cases (one none of whose targets the run ran is not
  exercised, not stale).

A case finding is waived (reported, not blocking) when its record is ``waived`` (a live marker
or configured waiver excused it when it ran, under its ``max`` ceiling if it has one) or an
unexpired configured waiver's glob matches its case id.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from mluverify.core.expectations import WAIVED_BUT_WORSENED
from mluverify.core.status import PASSED, WAIVED


if TYPE_CHECKING:
    import pandas as pd

    from mluverify.core.expectations import Waiver, Where
    from mluverify.report.spread import Spread

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
                  regress_factor: float = 1.5, noise_floor: float = 1e-6,
                  waivers: "Mapping[str, Waiver] | None" = None, today: dt.date | None = None,
                  allow: Collection[str] = (), selected: Collection[str] | None = None,
                  incomplete: str = "", stale_waivers: bool = False, spread: "Spread | None" = None,
                  corrupt: Sequence[str] = ()) -> GateResult:
    """Apply every gate rule to the records of ``run`` (against ``baseline`` when given);
    ``waivers`` maps case-id globs to waivers (``mluverify.core.expectations.parse_waivers``); ``allow``:
    statuses admitted; ``selected``: what the run selected (``in_selection``; None: all); ``incomplete``:
    why the run did not finish (a blocking finding: an incomplete run never passes the gate);
    ``stale_waivers``: a configured waiver that covers nothing in the run (of a target it ran),
    or only passing cases, is a blocking finding (``mluverify.report.expectations_check``); ``spread``: the baseline
    runs' spread, widening a noisy case's "worsened" limit (``mluverify.report.spread``);
    ``corrupt``: the run's shard lines that were no record (``<shard> line <n>: <why>``), each a
    blocking finding."""
    import pandas as pd

    today, waivers = today or dt.date.today(), waivers or {}
    if run.empty:
        return GateResult(_frame([{"rule": "empty run", "detail": "the run holds no records: nothing was verified"}]))
    cases = case_findings(run, baseline, regress_factor=regress_factor, noise_floor=noise_floor,
                          allow=allow, selected=selected, spread=spread)
    worsened = ceiling_details(cases, waivers, today, run)
    over = worsened != ""
    cases["rule"], cases["detail"] = cases["rule"].mask(over, WAIVED_BUT_WORSENED), cases["detail"].mask(over, worsened)
    cases["waiver"] = waiver_reasons(cases, waivers, today).mask(cases["rule"] == WAIVED_BUT_WORSENED, "")
    expired = [
        {"rule": "expired waiver", "case_id": pattern,
         "detail": f"waiver expired on {w.until.isoformat()} (reason: {w.reason}); fix the cases or renew it"}
        for pattern, w in waivers.items() if w.expired(today)
    ]
    unfinished = [{"rule": "incomplete run", "detail": f"{incomplete}; rerun it whole, or pass "
                                                       f"--mlu-allow-incomplete"}] if incomplete else []
    stale = _stale_waivers(run, waivers, today) if stale_waivers else []
    lost = [{"rule": "corrupt record", "detail": f"{entry}; the record it held (a failure, maybe) is lost: "
                                                 f"rerun its test"} for entry in corrupt]
    return GateResult(pd.concat([cases, _frame(expired + unfinished + stale + lost)], ignore_index=True))


def _stale_waivers(run: "pd.DataFrame", waivers: "Mapping[str, Waiver]", today: dt.date) -> list[dict[str, Any]]:
    from mluverify.core.expectations import ExpectationsFile
    from mluverify.report.expectations_check import check_expectations

    configured = ExpectationsFile(None, (), waivers, {pattern: pattern for pattern in waivers})
    return [{"rule": "stale waiver", "case_id": check.key,
             "detail": f"{'; '.join(check.problems[:1])}: remove it (mluverify expectations check --prune)"}
            for check in check_expectations(run, [configured], today) if check.stale]


# Record status -> the rule a case breaks when it is not ok.
_STATUS_RULES = {"failed": "fails tolerance", "waived": "fails tolerance", "errored": "errored",
                 "not_on_device": "not_on_device", "not_fused": "not_fused",
                 "nondeterministic": "nondeterministic"}


def case_findings(run: "pd.DataFrame", baseline: "pd.DataFrame | None", *, regress_factor: float,
                  noise_floor: float, allow: Collection[str] = (),
                  selected: Collection[str] | None = None, spread: "Spread | None" = None) -> "pd.DataFrame":
    """Findings of the per-case rules, ``waiver`` not yet filled in."""
    from mluverify.report.diff import compare_cases

    empty = run.iloc[:0] if baseline is None else baseline
    cases = compare_cases(empty, run, regress_factor=regress_factor, noise_floor=noise_floor,
                          ok_statuses=(PASSED, *allow), spread=spread)
    if selected is not None:
        cases = cases[(cases["status"] != "missing") | in_selection(cases["case_id"], selected)]
    by_status = cases["record_status_new"].map(_STATUS_RULES)
    rule = cases["status"].map({"new failure": "new failure", "worsened": "worsened", "missing": "missing"})
    not_ok = cases["status"].isin(["still failing", "added", "new failure"]) & by_status.notna() & \
        ~cases["record_status_new"].isin(allow)
    rule = rule.mask(cases["status"].isin(["still failing", "added"]) & not_ok, by_status)
    grew_waived = (cases["record_status_new"] == WAIVED) & cases["grew"].astype(bool)
    # a record its waiver did not excuse, the value being above the ceiling (the pipeline's reason)
    over_ceiling_when_run = not_ok & cases["reason_new"].fillna("").str.startswith(f"{WAIVED_BUT_WORSENED}:")
    rule = rule.mask(grew_waived | over_ceiling_when_run, WAIVED_BUT_WORSENED)
    found = cases[rule.notna()].assign(rule=rule[rule.notna()])
    found = found.rename(columns={"value_new": "value", "value_base": "baseline_value", "bound_new": "bound"})
    sigmas = spread.sigmas if spread is not None else 0.0
    found["detail"] = found.apply(_detail, axis=1, regress_factor=regress_factor, sigmas=sigmas) if len(found) else ""
    found = _task_rule(found, run)
    waived_in_run = found["record_status_new"] == WAIVED
    found["waiver"] = waived_in_run.map({True: "waived when it ran", False: ""})
    return found[FINDING_COLUMNS]


TASK_RULE = "task below threshold"


def _task_rule(found: "pd.DataFrame", run: "pd.DataFrame") -> "pd.DataFrame":
    """A case that fails for its task metric (not for a worse value) is a ``task below
    threshold`` finding, its detail the test in words (from the record's ``task_*`` columns)."""
    import pandas as pd

    if "task_value" not in run.columns or found.empty:
        return found
    below = run[run["task_value"] < run["task_threshold"]]
    details = dict(zip(zip(below["case_id"], below["target"]), below.apply(task_detail, axis=1))) if len(below) else {}
    detail = pd.Series([details.get(key, "") for key in zip(found["case_id"], found["target"])], index=found.index)
    hit = found["rule"].isin(["fails tolerance", "new failure"]) & (detail != "")
    return found.assign(rule=found["rule"].mask(hit, TASK_RULE), detail=found["detail"].mask(hit, detail))


# Where a pytest node id nests: a directory, a file's test (or class), a parameter set, a repeat.
_NODE_NESTING = re.compile(r"/|::|\[|#")


def in_selection(case_ids: "pd.Series", selected: Collection[str]) -> "pd.Series":
    """Per case id, whether the run selected it: the id is an entry of ``selected`` (a test id,
    or a path or node id relative to the rootdir) or lies under one: ``a/ops`` holds
    ``a/ops/test_x.py::test_y[p]``, and a test id its second comparison ``test_y[p]#2``."""
    entries = set(selected)

    def selected_case(case_id: str) -> bool:
        return case_id in entries or any(case_id[:cut.start()] in entries for cut in _NODE_NESTING.finditer(case_id))

    return case_ids.map(selected_case).astype(bool)


def task_detail(row: "Mapping[str, Any]") -> str:
    """A task metric's gate in words: value, threshold, reference, samples and error budget."""
    return (f"{row['task_metric']} {row['task_value']:.4f} < threshold {row['task_threshold']:.4f} over "
            f"{int(row['task_samples'])} samples (reference {row['task_reference']:.4f}; one-sided exact binomial "
            f"test at alpha {row['task_alpha']:g}, power {1 - row['task_beta']:g} against a drop of "
            f"{row['task_effect']:.4f})")


def _detail(row: "pd.Series", regress_factor: float, sigmas: float) -> str:
    if row["rule"] == "missing":
        return "in the baseline but not in this run"
    if row["rule"] == "worsened" or (row["rule"] == WAIVED_BUT_WORSENED and row["grew"]):
        if row["spread_runs"] == row["spread_runs"]:  # not NaN: the baseline runs' spread set the limit
            return (f"{row['value']:.4g} > {row['limit']:.4g} = mean {row['spread_mean']:.4g} + {sigmas:g} "
                    f"x spread {row['spread']:.4g} over {int(row['spread_runs'])} baseline runs")
        return f"{row['value']:.4g} > {regress_factor:g} x baseline {row['baseline_value']:.4g}"
    # the record's own words first: an error message, then the verdict's reason
    if row["error_new"] or row["reason_new"]:
        return row["error_new"] or row["reason_new"]
    return f"{row['value']:.4g} > bound {row['bound']:.4g}"


def ceiling_details(findings: "pd.DataFrame", waivers: "Mapping[str, Waiver]", today: dt.date,
                    run: "pd.DataFrame") -> "pd.Series":
    """Per finding, why the first unexpired configured waiver that ``covers`` it excuses nothing
    (a value of the case's records in ``run`` is above the waiver's ceiling for its record
    kind), or ``""``."""
    import pandas as pd

    from mluverify.core.expectations import covering
    from mluverify.core.gradients import OUTPUT
    from mluverify.report.tables import CASE_KEY

    records = run.reindex(columns=[*CASE_KEY, "kind", "value"])
    records["kind"] = records["kind"].where(records["kind"].notna() & (records["kind"] != ""), OUTPUT)
    values = records.groupby(CASE_KEY, dropna=False)[["kind", "value"]]

    def detail(row: "pd.Series") -> str:
        found, case = covering(row["case_id"], waivers, where_of(row), today), (row["case_id"], row["target"])
        if found is None or case not in values.groups:  # a missing case: no value to be above a ceiling
            return ""
        pattern, waiver = found
        judged = values.get_group(case)
        over = [(kind, value) for kind, value in zip(judged["kind"], judged["value"]) if waiver.over_ceiling(value, kind)]
        return f"{pattern}: {waiver.worsened('value', over[0][1], over[0][0])}" if over else ""

    return findings.apply(detail, axis=1).astype(object) if len(findings) else pd.Series("", index=findings.index)


def waiver_reasons(findings: "pd.DataFrame", waivers: "Mapping[str, Waiver]", today: dt.date) -> "pd.Series":
    """Per finding, the waiver that covers it (marker first, then the first unexpired configured
    waiver that ``covers`` its case where it ran), or ``""``."""
    from mluverify.core.expectations import covering

    def reason(row: "pd.Series") -> str:
        found = None if row["waiver"] else covering(row["case_id"], waivers, where_of(row), today)
        if found is None:
            return row["waiver"]
        pattern, waiver = found
        return f"{pattern}: {waiver.reason} (until {waiver.until.isoformat()})"

    return findings.apply(reason, axis=1).astype(object) if len(findings) else findings["waiver"].copy()


def where_of(row: "Mapping[str, Any]") -> "Where":
    """Where the record (or finding) ``row`` ran, from its columns (a missing column: not known)."""
    from mluverify.core.expectations import Where

    def known(column: str) -> str | None:
        value = row.get(column)
        return value if isinstance(value, str) and value else None

    return Where(known("target"), known("core_version"), known("device_impl"), known("torch_version"))


def _frame(rows: list[dict[str, Any]]) -> "pd.DataFrame":
    import pandas as pd

    return pd.DataFrame([{"waiver": "", **row} for row in rows], columns=FINDING_COLUMNS)
