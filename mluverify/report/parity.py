"""Parity across targets: per case, the status each target gave it, and the gaps where a
reference target passes and another does not (``mluverify parity RUN...``).

A case is its case id with the target taken out (``test_x[mlu:cnml-MLU270-mm]`` ->
``test_x[{target}-MLU270-mm]``), so the same case on every target is one row; several records
of one case on one target (hypothesis examples, several runs) give the most severe status
(``mluverify.core.status.STATUSES``). A target that did not run a case leaves its cell empty:
that is not a gap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from mluverify.core.status import PASSED, STATUSES
from mluverify.errors import InvalidArgument

if TYPE_CHECKING:
    import pandas as pd

TARGET_PLACEHOLDER = "{target}"
NOT_RUN = ""


@dataclass(frozen=True)
class Parity:
    """``matrix``: one row per case (column ``case``), one status column per target, and
    ``gap`` (the targets that fail where the reference passes, ``", "``-joined); ``gaps``:
    per target, how many cases it fails where ``reference`` passes."""

    reference: str
    matrix: "pd.DataFrame"
    gaps: "pd.Series"


def case_key(records: "pd.DataFrame") -> "pd.Series":
    """Per record, its case id with its own target replaced by ``TARGET_PLACEHOLDER``."""
    keys = records["case_id"].astype(str).copy()
    for target in records["target"].dropna().unique():
        rows = records["target"] == target
        keys[rows] = keys[rows].str.replace(str(target), TARGET_PLACEHOLDER, n=1, regex=False)
    return keys


def parity(records: "pd.DataFrame", reference: str) -> Parity:
    """The parity matrix of ``records`` (columns ``case_id``, ``target``, ``status``; from one
    run or several merged) against the ``reference`` target."""
    import pandas as pd

    targets = sorted(records["target"].dropna().unique())
    if reference not in targets:
        raise InvalidArgument(f"--reference {reference!r} ran no case here; targets: {', '.join(targets) or 'none'}")
    severity = pd.Categorical(records["status"], categories=list(STATUSES), ordered=True)
    frame = pd.DataFrame({"case": case_key(records), "target": records["target"].to_numpy(),
                          "severity": severity.codes})
    worst = frame.groupby(["case", "target"], sort=False)["severity"].min()
    statuses = pd.Series(pd.Categorical.from_codes(worst.to_numpy(), list(STATUSES)).astype(str), index=worst.index)
    matrix = statuses.unstack("target").reindex(columns=targets).fillna(NOT_RUN).sort_index()
    others = [target for target in targets if target != reference]
    reference_passes = matrix[reference] == PASSED
    failing = pd.DataFrame({target: reference_passes & ~matrix[target].isin([PASSED, NOT_RUN])
                            for target in others}, index=matrix.index)
    matrix["gap"] = _joined(failing)
    matrix = matrix.rename_axis(columns=None).reset_index()
    return Parity(reference, matrix, failing.sum().astype(int).rename("gaps"))


def _joined(flags: "pd.DataFrame") -> "pd.Series":
    """Per row, the names of the columns that are True, ``", "``-joined."""
    import pandas as pd

    if flags.empty or not len(flags.columns):
        return pd.Series(NOT_RUN, index=flags.index)
    return flags.dot(pd.Index([f"{name}, " for name in flags.columns])).str.removesuffix(", ")


def filtered(result: Parity, *, gaps_only: bool = False, statuses: Sequence[str] = (),
             contains: str = "") -> "pd.DataFrame":
    """The rows of the matrix with a gap (``gaps_only``), with any of ``statuses`` on some
    target, or whose case holds ``contains``."""
    matrix = result.matrix
    keep = matrix["case"].str.contains(contains, regex=False) if contains else matrix["case"].notna()
    if gaps_only:
        keep &= matrix["gap"] != NOT_RUN
    if statuses:
        targets = [column for column in matrix.columns if column not in ("case", "gap")]
        keep &= matrix[targets].isin(list(statuses)).any(axis=1)
    return matrix[keep]


def gap_line(result: Parity) -> str:
    """One line: the gaps per target against the reference."""
    counts = ", ".join(f"{target} {count}" for target, count in result.gaps.items()) or "no other target"
    return f"parity against {result.reference} ({len(result.matrix)} cases): gaps {counts}"


def parity_html(result: Parity, table_id: str = "parity") -> str:
    """The matrix as an interactive, filterable table (rows with a gap first)."""
    from mluverify.report.render import TableSpec, html_paragraph, html_table

    matrix = result.matrix.assign(parity=(result.matrix["gap"] != NOT_RUN).map({True: "failing", False: "ok"}))
    matrix = matrix.sort_values("parity", kind="stable")
    spec = TableSpec(long={"case": 30}, tone="parity", order=("failing", "ok"))
    return html_paragraph(gap_line(result)) + html_table(matrix, table_id, spec)


DEFAULT_REFERENCE = "mlu:cnnl"


def parity_sections(cases: "pd.DataFrame", reference: str = DEFAULT_REFERENCE) -> list[tuple[str, str]]:
    """The run report's parity section: none when the run has fewer than two targets (the
    reference is ``reference`` when it ran, else the first target by name)."""
    targets = sorted(cases["target"].dropna().unique()) if len(cases) else []
    if len(targets) < 2:
        return []
    chosen = reference if reference in targets else targets[0]
    return [("Parity across targets", parity_html(parity(cases, chosen)))]
