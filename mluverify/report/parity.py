"""Parity across targets: per case, the status each target gave it, and the gaps where a
reference target passes and another does not (``mluverify parity RUN...``).

A case is its case id with the target and the device variant that follows it taken out
(``test_x[mlu:cnml-MLU270-mm]`` and ``test_x[cpu:inductor-mm]`` are both
``test_x[{target}-mm]``), so the same case on every target is one row per core version (its own
column, from the records' ``core_version``): the MLU's targets are lined up core version by core
version, and a target without variants (``cpu:inductor``, ``ort:cpu``) stands beside each of
them. Several records of one case on one target (hypothesis examples, several runs) give the
most severe status (``mluverify.core.status.STATUSES``). A target that did not run a case leaves
its cell empty: that is not a gap.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from mluverify.core.status import PASSED, STATUSES
from mluverify.errors import InvalidArgument

if TYPE_CHECKING:
    import pandas as pd

TARGET_PLACEHOLDER = "{target}"
NOT_RUN = ""
VARIANT = "core_version"  # the matrix column of the device variant a row's cases ran on ("": none)
KEY = ["case", VARIANT]


@dataclass(frozen=True)
class Parity:
    """``matrix``: one row per case and core version (columns ``case``, ``core_version``), one
    status column per target, and ``gap`` (the targets that fail where the reference passes,
    ``", "``-joined); ``gaps``: per target, how many rows it fails where ``reference`` passes."""

    reference: str
    matrix: "pd.DataFrame"
    gaps: "pd.Series"


def variants(records: "pd.DataFrame") -> "pd.Series":
    """Per record, the device variant it ran on (``core_version``; ``""`` for none)."""
    return records[VARIANT].fillna(NOT_RUN).astype(str)


def case_key(records: "pd.DataFrame") -> "pd.Series":
    """Per record, its case id with its own target, and the variant right after it
    (``mlu:cnnl-MLU270``), replaced by ``TARGET_PLACEHOLDER``."""
    import pandas as pd

    keys = records["case_id"].astype(str).to_numpy(copy=True)
    by_target = records.groupby([records["target"].to_numpy(), variants(records).to_numpy()])
    for (target, variant), rows in by_target.indices.items():  # positions: runs merged repeat the index
        pattern = re.escape(str(target)) + (f"(?:-{re.escape(variant)})?" if variant else "")
        keys[rows] = pd.Series(keys[rows]).str.replace(pattern, TARGET_PLACEHOLDER, n=1, regex=True).to_numpy()
    return pd.Series(keys, index=records.index)


def parity(records: "pd.DataFrame", reference: str) -> Parity:
    """The parity matrix of ``records`` (columns ``case_id``, ``target``, ``core_version``,
    ``status``; from one run or several merged) against the ``reference`` target."""
    import pandas as pd

    targets = sorted(records["target"].dropna().unique())
    if reference not in targets:
        raise InvalidArgument(f"--reference {reference!r} ran no case here; targets: {', '.join(targets) or 'none'}")
    severity = pd.Categorical(records["status"], categories=list(STATUSES), ordered=True)
    frame = _beside_every_variant(pd.DataFrame({"case": case_key(records), VARIANT: variants(records).to_numpy(),
                                                "target": records["target"].to_numpy(), "severity": severity.codes}))
    worst = frame.groupby([*KEY, "target"], sort=False)["severity"].min()
    statuses = pd.Series(pd.Categorical.from_codes(worst.to_numpy(), list(STATUSES)).astype(str), index=worst.index)
    matrix = statuses.unstack("target").reindex(columns=targets).fillna(NOT_RUN).sort_index()
    others = [target for target in targets if target != reference]
    reference_passes = matrix[reference] == PASSED
    failing = pd.DataFrame({target: reference_passes & ~matrix[target].isin([PASSED, NOT_RUN])
                            for target in others}, index=matrix.index)
    matrix["gap"] = _joined(failing)
    matrix = matrix.rename_axis(columns=None).reset_index()
    return Parity(reference, matrix, failing.sum().astype(int).rename("gaps"))


def _beside_every_variant(frame: "pd.DataFrame") -> "pd.DataFrame":
    """``frame`` with each record of a target without variants repeated for every variant its
    case ran on elsewhere (so ``ort:cpu`` is compared with ``mlu:cnnl`` on MLU270 and on MLU370)."""
    import pandas as pd

    plain = frame[VARIANT] == NOT_RUN
    ran_on = frame.loc[~plain, KEY].drop_duplicates()
    spread = frame[plain].drop(columns=VARIANT).merge(ran_on, on="case", how="left").fillna({VARIANT: NOT_RUN})
    return pd.concat([frame[~plain], spread[frame.columns]], ignore_index=True)


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
        targets = [column for column in matrix.columns if column not in (*KEY, "gap")]
        keep &= matrix[targets].isin(list(statuses)).any(axis=1)
    return matrix[keep]


def gap_line(result: Parity) -> str:
    """One line: the gaps per target against the reference."""
    counts = ", ".join(f"{target} {count}" for target, count in result.gaps.items()) or "no other target"
    cases, rows = result.matrix["case"].nunique(), len(result.matrix)
    size = f"{cases} cases" if rows == cases else f"{cases} cases, {rows} with their core versions"
    return f"parity against {result.reference} ({size}): gaps {counts}"


def parity_html(result: Parity, table_id: str = "parity") -> str:
    """The matrix as an interactive, filterable table (rows with a gap first)."""
    from mluverify.report.render import TableSpec, html_paragraph, html_table

    matrix = result.matrix.assign(parity=(result.matrix["gap"] != NOT_RUN).map({True: "failing", False: "ok"}))
    matrix = matrix.sort_values("parity", kind="stable")
    spec = TableSpec(long={"case": 30}, tone="parity", order=("failing", "ok"))
    return html_paragraph(gap_line(result)) + html_table(matrix, table_id, spec)


# Families of the ops of cases that are not in an op suite module of their own (OpInfo samples,
# captured ops): the op suites' module names, matched on the op's name in this order (a linalg
# norm is a linalg op before it is a norm); anything else is pointwise.
FAMILY_PATTERNS: tuple[tuple[str, str], ...] = (
    ("fft", r"^fft\."), ("linalg", r"^linalg\."), ("conv", r"conv"), ("pool", r"pool"),
    ("norms", r"norm"), ("recurrent", r"rnn|lstm|gru"),
    ("matmul", r"^(?:mm|bmm|matmul|addmm|addmv|addbmm|baddbmm|addr|mv|dot|vdot|inner|outer|tensordot|einsum"
               r"|nn\.functional\.(?:linear|bilinear))$"),
    ("resample", r"interpolate|upsample|grid_sample|affine_grid|pixel_(?:un)?shuffle"),
    ("reductions", r"^(?:sum|nansum|mean|nanmean|prod|amax|amin|aminmax|max|min|std|var|std_mean|var_mean|logsumexp"
                   r"|cum\w+|log_?cumsumexp|argmax|argmin|all|any|count_nonzero|median|nanmedian|mode|kthvalue"
                   r"|topk|sort|argsort|softmax|log_softmax|nn\.functional\.(?:softmax|log_softmax|softmin))$"),
    ("layout", r"^(?:view|reshape|permute|transpose|t|cat|stack|hstack|vstack|dstack|split|chunk|flip|fliplr|flipud"
               r"|roll|rot90|gather|scatter\w*|index_\w+|take\w*|select\w*|narrow|expand\w*|squeeze|unsqueeze"
               r"|repeat\w*|tile|movedim|unfold|diag\w*|tril|triu|masked_\w+|nn\.functional\.pad|flatten|unflatten)$"),
)
POINTWISE = "pointwise"
# Deviations that count as shared: a value outside the bound, on targets of different back ends
# (two independent implementations; ``ort:cpu`` and ``ort:dynamo`` share a runtime).
DEVIATION = "failed"


def op_families(records: "pd.DataFrame") -> "pd.Series":
    """Per record, its op family: the op suite module a case comes from (``suites/ops/test_conv.py``:
    ``conv``), else the family of its op's name (``FAMILY_PATTERNS``; ``pointwise`` for the rest),
    else its suite (``networks``, ``training``)."""
    import pandas as pd

    module = records["case_id"].astype(str).str.extract(r"(?:^|/)ops/test_(\w+)\.py::")[0]
    ops = records["op"].astype("string") if "op" in records else pd.Series(pd.NA, index=records.index, dtype="string")
    by_name = pd.Series(pd.NA, index=records.index, dtype="string")
    for family, pattern in FAMILY_PATTERNS:
        by_name = by_name.mask(by_name.isna() & ops.str.contains(pattern, regex=True).fillna(False), family)
    op_cases = records["suite"].isin(["opinfo", "captured"]) if "suite" in records else ops.notna()
    by_name = by_name.mask(by_name.isna() & op_cases, POINTWISE)
    suites = records["suite"].astype("string") if "suite" in records else by_name
    return module.astype("string").fillna(by_name).fillna(suites).fillna(POINTWISE)


@dataclass(frozen=True)
class FamilyParity:
    """``table``: per op family (rows) and target (columns), ``"passed/judged"`` over the
    family's cases that target ran (a case passes when every one of its records passed: it
    agrees with the CPU within its bound, and with float64 where the golden rule judged it);
    ``shared``: the cases that fail on targets of two or more different back ends, with those
    targets (``", "``-joined) and their family: a deviation two implementations share, a lead to
    a shared lowering or to the reference."""

    table: "pd.DataFrame"
    shared: "pd.DataFrame"


def family_parity(records: "pd.DataFrame") -> FamilyParity:
    """The family view of ``records`` (columns ``case_id``, ``target``, ``core_version``,
    ``status``, ``suite``, ``op``; one run or several merged)."""
    import pandas as pd

    severity = pd.Categorical(records["status"], categories=list(STATUSES), ordered=True)
    frame = pd.DataFrame({"case": case_key(records).to_numpy(), VARIANT: variants(records).to_numpy(),
                          "family": op_families(records).to_numpy(), "target": records["target"].to_numpy(),
                          "severity": severity.codes})
    worst = frame.groupby(["family", *KEY, "target"])["severity"].min().reset_index()
    worst["status"] = pd.Categorical.from_codes(worst["severity"].to_numpy(), list(STATUSES)).astype(str)
    counts = worst.assign(passed=worst["status"] == PASSED).groupby(["family", "target"])["passed"].agg(["sum", "size"])
    table = (counts["sum"].astype(str) + "/" + counts["size"].astype(str)).unstack("target").fillna(NOT_RUN)
    deviating = worst[worst["status"] == DEVIATION].assign(backend=lambda f: f["target"].str.split(":").str[0])
    per_case = deviating.groupby(["family", *KEY]).agg(targets=("target", lambda t: ", ".join(sorted(t))),
                                                        backends=("backend", "nunique")).reset_index()
    shared = per_case[per_case["backends"] >= 2].drop(columns="backends").reset_index(drop=True)
    return FamilyParity(table.rename_axis(index=None, columns=None), shared)


DEFAULT_REFERENCE = "mlu:cnnl"


def parity_sections(cases: "pd.DataFrame", reference: str = DEFAULT_REFERENCE) -> list[tuple[str, str]]:
    """The run report's parity section: none when the run has fewer than two targets (the
    reference is ``reference`` when it ran, else the first target by name)."""
    targets = sorted(cases["target"].dropna().unique()) if len(cases) else []
    if len(targets) < 2:
        return []
    chosen = reference if reference in targets else targets[0]
    return [("Parity across targets", parity_html(parity(cases, chosen)))]
