"""The zoo's dashboard view (PyTorch's accuracy dashboard, ``benchmarks/dynamo/ci_expected_accuracy``):
each case's status in the dashboard's words, the expected statuses and their check in both
directions, the rows each case leaves in the run directory, and the pass-rate table.

Statuses (``ZOO_STATUSES``): ``pass``, ``fail_accuracy`` (the judged metric breaks its bound),
``fail_to_run`` (the model raised: in eager on the CPU, on the device, or it killed the process),
``nondeterministic`` (the dashboard's ``eager_two_runs_differ``: two eager CPU runs, or two
device runs, differ), and mluverify's own ``not_on_device`` / ``not_fused``.
"""
from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping

from mluverify.core.expectations import Waiver, covering, load_expectations
from mluverify.errors import ConfigError

PASS, FAIL_ACCURACY, FAIL_TO_RUN, NONDETERMINISTIC = "pass", "fail_accuracy", "fail_to_run", "nondeterministic"
SKIPPED = "skipped"  # the target does not run the case (e.g. int8 on a target that quantizes nothing)
ZOO_STATUSES = (PASS, FAIL_ACCURACY, FAIL_TO_RUN, NONDETERMINISTIC, "not_on_device", "not_fused")
# mluverify's statuses (mluverify.core.status) in the dashboard's words
DASHBOARD = {"passed": PASS, "failed": FAIL_ACCURACY, "errored": FAIL_TO_RUN, "nondeterministic": NONDETERMINISTIC,
             "not_on_device": "not_on_device", "not_fused": "not_fused"}
EXPECTED_FILE = Path(__file__).with_name("expected_status.toml")
ROWS_DIR = "zoo"  # in the run directory: one JSON-lines file per process
KILLED = "killed the process while running (no end was recorded)"


@dataclass(frozen=True)
class ZooRow:
    """One case of the zoo as the dashboard shows it."""

    case_id: str
    model: str
    family: str
    input_kind: str
    target: str
    core_version: str
    dtype: str
    mode: str  # eval, int8 or train
    status: str
    reason: str = ""
    seconds: float = 0.0
    first_bad_op: str = ""  # dump-diff's first op (or fusion group) whose own error breaks the bound


def record_status(record: Mapping) -> str:
    """The dashboard status of one record; a waived record by what it was (its error, its
    verdict, or the provenance status its reason names)."""
    status = record["status"]
    if status != "waived":
        return DASHBOARD[status]
    if record.get("error"):
        return FAIL_TO_RUN
    if not record.get("passed"):
        return FAIL_ACCURACY
    return next((name for name in ZOO_STATUSES[3:] if name in (record.get("reason") or "")), FAIL_ACCURACY)


def case_status(records: Iterable[Mapping]) -> tuple[str, str]:
    """``(status, reason)`` of a case from its records: the most severe record's."""
    order = (FAIL_TO_RUN, "not_on_device", "not_fused", NONDETERMINISTIC, FAIL_ACCURACY, PASS)
    judged = [(order.index(record_status(record)), record_status(record), record.get("error") or record.get("reason")
               or "") for record in records]
    if not judged:
        return FAIL_TO_RUN, "no comparison was recorded"
    _, status, reason = min(judged)
    return status, reason


def load_expected(path: Path = EXPECTED_FILE) -> dict[str, Waiver]:
    """The expected statuses of ``path`` (the expectations format: a waiver per case-id glob,
    its reason starting with the expected status and a colon), as ``case-id glob -> waiver``."""
    expectations = load_expectations(path)
    for key, waiver in expectations.waivers.items():
        if expected_of(waiver) is None:
            raise ConfigError(f"{path}: waiver {key!r}: its reason must start with the expected status and a colon, "
                              f"one of {', '.join(ZOO_STATUSES[1:])} (got {waiver.reason!r})")
    return {expectations.case_id_globs[key]: waiver for key, waiver in expectations.waivers.items()}


def expected_of(waiver: Waiver | None) -> str | None:
    """The status a waiver expects (``pass`` without one); None when its reason names none."""
    if waiver is None:
        return PASS
    status = waiver.reason.split(":", 1)[0].strip()
    return status if status in ZOO_STATUSES[1:] else None


def expected_status(case_id: str, expected: Mapping[str, Waiver]) -> tuple[str, Waiver | None]:
    """The status expected of ``case_id`` and the entry that says so (none: ``pass``)."""
    found = covering(case_id, expected)
    waiver = None if found is None else found[1]
    return expected_of(waiver), waiver


def gate_message(expected: str, actual: str, reason: str) -> str | None:
    """Why a case whose status is ``actual`` breaks the expectation ``expected`` (None: it keeps
    it): a new failure, an improvement (the dashboard's "improved": the expectations must be
    updated) or a changed failure."""
    if actual == expected:
        return None
    update = f"update {EXPECTED_FILE.name}"
    if actual == PASS:
        return f"improved: expected {expected}, now pass ({update}: remove its entry)"
    if expected == PASS:
        return f"new failure: {actual}: {reason}"
    return f"changed: expected {expected}, now {actual}: {reason} ({update})"


def write_row(run_dir: Path, row: ZooRow) -> None:
    """Append ``row`` to this process's rows in ``run_dir`` (a later row of a case replaces an
    earlier one: a case writes one as it starts, so a case that kills the process keeps it)."""
    folder = Path(run_dir) / ROWS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"{worker}-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(row)) + "\n")


def read_rows(run_dir: Path) -> list[ZooRow]:
    """The last row of each case in ``run_dir``, cases in the order they started."""
    rows: dict[str, ZooRow] = {}
    for path in sorted((Path(run_dir) / ROWS_DIR).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = ZooRow(**json.loads(line))
            rows[row.case_id] = row
    return list(rows.values())


@dataclass(frozen=True)
class PassRate:
    """One cell of the dashboard: cases of ``family`` on ``target`` that ran (skips left out)."""

    target: str
    family: str
    passed: int
    total: int
    seconds_per_model: float
    statuses: dict[str, int]

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


def pass_rates(rows: Iterable[ZooRow]) -> list[PassRate]:
    """Pass rate per target and family (and ``all`` per target), skipped cases left out."""
    groups: dict[tuple[str, str], list[ZooRow]] = defaultdict(list)
    for row in rows:
        if row.status != SKIPPED:
            groups[(row.target, row.family)].append(row)
            groups[(row.target, "all")].append(row)
    rates = []
    for (target, family), members in sorted(groups.items()):
        counts: dict[str, int] = defaultdict(int)
        for row in members:
            counts[row.status] += 1
        rates.append(PassRate(target, family, counts[PASS], len(members),
                              sum(row.seconds for row in members) / len(members), dict(counts)))
    return rates


def markdown(rows: list[ZooRow]) -> str:
    """The dashboard as markdown: pass rates per target and family, then each failing case with
    its reason and the op dump-diff blames."""
    lines = ["# Model zoo", "", "| target | family | pass | cases | rate | s / case | other statuses |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for rate in pass_rates(rows):
        others = ", ".join(f"{status} {count}" for status, count in sorted(rate.statuses.items()) if status != PASS)
        lines.append(f"| {rate.target} | {rate.family} | {rate.passed} | {rate.total} | {rate.rate:.0%} | "
                     f"{rate.seconds_per_model:.1f} | {others} |")
    failing = [row for row in rows if row.status not in (PASS, SKIPPED)]
    if failing:
        lines += ["", "## Failing cases", "", "| model | family | target | dtype | mode | status | first op blamed | reason |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {row.model} | {row.family} | {row.target}{'/' + row.core_version if row.core_version else ''} | "
                  f"{row.dtype} | {row.mode} | {row.status} | {row.first_bad_op or '-'} | "
                  f"{row.reason[:200].replace('|', '/')} |" for row in failing]
    return "\n".join(lines) + "\n"


def html_page(rows: list[ZooRow]) -> str:
    """The same tables as a standalone HTML page."""
    def table(header: list[str], body: list[list[str]]) -> str:
        head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
        cells = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in line) + "</tr>" for line in body)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"

    rates = [[r.target, r.family, str(r.passed), str(r.total), f"{r.rate:.0%}", f"{r.seconds_per_model:.1f}",
              ", ".join(f"{s} {n}" for s, n in sorted(r.statuses.items()) if s != PASS)] for r in pass_rates(rows)]
    failing = [[row.model, row.family, row.target, row.dtype, row.mode, row.status, row.first_bad_op or "-",
                row.reason[:300]] for row in rows if row.status not in (PASS, SKIPPED)]
    return ("<!doctype html><meta charset='utf-8'><title>Model zoo</title><h1>Model zoo: pass rates</h1>"
            + table(["target", "family", "pass", "cases", "rate", "s / case", "other statuses"], rates)
            + "<h2>Failing cases</h2>"
            + table(["model", "family", "target", "dtype", "mode", "status", "first op blamed", "reason"], failing))


def write_dashboard(run_dir: Path) -> None:
    """``zoo.md`` and ``zoo.html`` in ``run_dir`` from its rows (nothing when it has none)."""
    rows = read_rows(run_dir)
    if rows:
        (run_dir / "zoo.md").write_text(markdown(rows), encoding="utf-8")
        (run_dir / "zoo.html").write_text(html_page(rows), encoding="utf-8")
