"""A dump taken with ``use_cpu`` as a per-op error table, its first offender, and whether the
dumped ops explain the case's output error.

Each op's **own** error is its device output against the CPU re-run on the same inputs;
the error it **inherited** is how far its inputs already were from a CPU-only run. Each op is
judged with the dumped case's own resolved tolerance (marker, hook, config or policy, as the
run judged the case; ``op_tolerance``). The first op (in execution order) whose own error
breaks it is where accuracy was lost; ops after it mostly carry inherited error and are not blamed. When the case failed (or
the dump's output is off) but no op's own error breaks the tolerance, nothing dumped explains
the failure: the error built up over several ops, or lies outside the dumped ops (the case is
judged against a float32 CPU reference, each op against a CPU re-run of its device inputs).

The harness's own deep copies and device moves (``HARNESS_OPS``) are left out of the shown
table unless they break the tolerance (``all_ops=True`` / ``--all-ops`` shows them).

A dump of a fused run (``dump_case`` on ``mlu:cnml``) also holds each fusion group's outputs
beside its own graph on the CPU (``fused_groups/``, ``mluverify.dump._groups``): the groups are
judged first, and the first group whose own error breaks the bound is blamed (the op table then
is the same call run layer by layer, which a fused kernel's error never reaches).

This module computes; the reports (CSV, markdown, the HTML page in the look of every mluverify
page) and the lookup of a run's record for its dump are the report's:
``mluverify.report.dump_diff``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mluverify.judge import EXACT, PAIR_JUDGEABLE, POLICIES, Tolerance, policy, raw_rel_mse_from_sqnr_db
from mluverify.dump._case import FUSED_GROUPS
from mluverify.dump._groups import GROUP_COLUMNS, first_wrong_group, group_table
from mluverify.dump._index import load
from mluverify.errors import RecordsError

_METRICS = ("rae", "rma", "max_abs", "max_rel", "cosine", "sqnr_db")
# Copies and device moves the harness itself makes around the op under test (deep-copying the
# model, moving inputs and outputs between devices): never the model's own arithmetic.
HARNESS_OPS = frozenset({
    "aten::clone", "aten::detach", "aten::_to_copy", "aten::copy_", "aten::_copy_from",
    "aten::_copy_from_and_resize", "aten::alias", "aten::lift_fresh", "aten::lift_fresh_copy",
    "aten::empty.memory_format", "aten::empty_strided", "aten::set_.source_Storage_storage_offset",
    "aten::set_.source_Storage",
})
# Exit status of ``mluverify dump-diff`` per verdict (2 is bad input, as for every command).
EXIT_STATUS = {"clean": 0, "blamed": 1, "unexplained": 3}


@dataclass(frozen=True)
class CaseError:
    """The dumped case's own judgement (from its record): its metric, value, bound, status, the
    mode (tolerance policy) it ran in and its resolved tolerance (None in records before it
    was recorded)."""

    metric: str
    value: float
    bound: float
    status: str
    mode: str = ""
    tolerance: Tolerance | None = None


@dataclass(frozen=True)
class OpTolerance:
    """What judges each dumped op: the tolerance, and a note when it is not the case's own."""

    tolerance: Tolerance
    note: str = ""


def op_tolerance(mode: str | None = None, case: CaseError | None = None) -> OpTolerance:
    """The tolerance each op's own error is judged with: ``mode``'s policy when asked for, else
    the case's resolved tolerance, else its mode's policy (``cnnl`` without one). ``exact`` is
    judged per op as ``max_abs`` 0; a metric the dump has no per-op value of (ULPs and the golden
    rule need a float64 result of every op; plugin metrics) falls back to the mode's policy,
    and the note says so."""
    fallback = policy(case.mode if case is not None and case.mode in POLICIES else "cnnl")
    if mode is not None:
        return OpTolerance(policy(mode))
    if case is None or case.tolerance is None:
        return OpTolerance(fallback)
    own = case.tolerance
    if own.metric == EXACT and not own.golden:
        return OpTolerance(Tolerance("max_abs", 0.0, own.source), f"exact ({own.source}) judged per op as max_abs 0")
    if own.metric in PAIR_JUDGEABLE and not own.golden:
        return OpTolerance(own)
    wanted = "the golden rule" if own.golden else f"{own.metric} <= {own.bound:g}"
    return OpTolerance(fallback, f"the case's tolerance ({wanted}, {own.source}) cannot be judged per op "
                                 f"(the dump has no float64 result of each op), so {fallback.source} judges each op")


@dataclass(frozen=True)
class DumpDiff:
    """The per-op error table of a dump and what it blames."""

    dump_dir: Path
    mode: str
    metric: str
    bound: float
    source: str  # where the tolerance judging each op came from: marker, config:<key>, policy:<mode>, ...
    table: pd.DataFrame  # one row per dumped op, in execution order
    first_offender: int | None  # seq of the first op whose own error breaks the bound
    reproducer: str | None
    output_rel_mse: float  # total error of the last judged op: the dumped call's result
    case: CaseError | None = None  # the case's record, when the dump belongs to a run
    note: str = ""  # why the ops are not judged with the case's own tolerance, when they are not
    # A fused run's fusion groups, one row per output in the order they ran (empty: none ran).
    groups: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=GROUP_COLUMNS))
    group_source: str = ""  # the tolerance judging the groups

    @property
    def first_group(self) -> pd.Series | None:
        """The first group output whose own error (against its graph on the CPU) breaks the bound."""
        return first_wrong_group(self.groups)

    @property
    def verdict(self) -> str:
        """``blamed`` (a fusion group's or an op's own error breaks the bound), ``unexplained``
        (the case failed, or the dump's output breaks the bound, yet nothing is blamed) or
        ``clean``."""
        if self.first_offender is not None or self.first_group is not None:
            return "blamed"
        if self.case is not None:
            return "unexplained" if self.case.status in ("failed", "waived") else "clean"
        return "unexplained" if self.output_rel_mse > self.bound else "clean"


def dump_diff(dump_dir: str | os.PathLike[str], mode: str | None = None,
              case: CaseError | None = None) -> DumpDiff:
    """Per-op own / inherited / total error of a ``use_cpu`` dump, each op judged by
    ``op_tolerance(mode, case)``: ``mode``'s policy when given, else the case's own resolved
    tolerance; ``case``: the dumped case's judgement (``mluverify.report.dump_diff.case_error``
    finds it for a run's dump). A fused run's groups (``fused_groups/``) are judged the same
    way, by ``cnml`` when neither ``mode`` nor ``case`` says (the fused policy; the ops of a dump
    run layer by layer and default to ``cnnl``)."""
    judging = op_tolerance(mode, case)
    group_tolerance = policy("cnml") if mode is None and case is None else judging.tolerance
    groups = group_table(Path(dump_dir) / FUSED_GROUPS, group_tolerance)
    tolerance = judging.tolerance
    mode = mode or (case.mode if case is not None and case.mode else "cnnl")
    index = load(dump_dir)
    # a real int8 runtime's dump holds only its layers' pairs (its kernels are no torch ops)
    if "inherited_rel_mse" not in index.columns and (len(index) or groups.empty):
        raise RecordsError(f"{Path(dump_dir)}: dumped without use_cpu, so there is no CPU "
                           f"result to compare with; dump again with Dumper(..., use_cpu=True)")
    # A dump whose ops had no floating result has no metric columns at all.
    index = index.reindex(columns=[*index.columns, *(
        column for column in ("rel_mse", "inherited_rel_mse", "total_rel_mse", "nan_mismatch", "cpu_error", *_METRICS)
        if column not in index.columns)])
    table = _op_table(index, tolerance)
    breaking = table[table["own_passed"] == False]  # noqa: E712 (NaN means not judged)
    first = None if breaking.empty else int(breaking["seq"].iloc[0])
    wrong_group = first_wrong_group(groups)
    reproducer = _group_reproducer(wrong_group, group_tolerance) if wrong_group is not None else \
        None if first is None else _reproducer(Path(dump_dir), index, first)
    totals = table["total_rel_mse"].dropna()
    output = float(totals.iloc[-1]) if len(totals) else math.nan
    return DumpDiff(Path(dump_dir), mode, tolerance.metric, tolerance.bound, tolerance.source, table, first,
                    reproducer, output, case, judging.note, groups, group_tolerance.source)


def _op_table(index: pd.DataFrame, tolerance: Tolerance) -> pd.DataFrame:
    results = index[index["role"] == "result"].drop_duplicates("seq")
    inputs = index[index["role"] == "input"]
    signatures = (inputs.groupby("seq")[["arg", "dtype", "shape"]].apply(_signature) if len(inputs)
                  else pd.Series(dtype=object))  # a dump with no op (only a real int8 runtime's layers)
    table = pd.DataFrame({
        "seq": results["seq"].to_numpy(),
        "path": results["path"].to_numpy(),
        "op": results["op"].to_numpy(),
        "inputs": signatures.reindex(results["seq"]).fillna("").to_numpy(),
        "own_rel_mse": results["rel_mse"].to_numpy(dtype=float),
        "inherited_rel_mse": results["inherited_rel_mse"].to_numpy(dtype=float),
        "total_rel_mse": results["total_rel_mse"].to_numpy(dtype=float),
    })
    table["bound"] = tolerance.bound
    for metric in _METRICS:
        table[f"own_{metric}"] = results[metric].to_numpy(dtype=float)
    # A rel_mse the eps rule zeroed (0 though sqnr_db is finite) is judged by its raw value, as
    # the case's own rel_mse gets a second look below the eps floor: zeroed, it says nothing.
    zeroed = (table["own_rel_mse"] == 0) & np.isfinite(table["own_sqnr_db"])
    table["own_raw_rel_mse"] = table["own_rel_mse"].where(~zeroed, raw_rel_mse_from_sqnr_db(table["own_sqnr_db"]))
    own = table["own_raw_rel_mse" if tolerance.metric == "rel_mse" else f"own_{tolerance.metric}"]
    table["own_value"] = own
    # NaN/Inf where the CPU has finite values (or the reverse) fails whatever the metric.
    table["nan_mismatch"] = results["nan_mismatch"].to_numpy(dtype=float)
    passed = (own <= tolerance.bound) & ~(table["nan_mismatch"] > 0)
    table["own_passed"] = passed.astype(object).where(own.notna(), None)
    table["cpu_error"] = results["cpu_error"].to_numpy()
    table["harness_copy"] = table["op"].isin(HARNESS_OPS)
    return table.sort_values("seq", kind="stable").reset_index(drop=True)


def shown_table(diff: DumpDiff, all_ops: bool = False) -> pd.DataFrame:
    """The op table as reports show it: without the harness's copies and moves unless
    ``all_ops`` (one that breaks the bound is always shown)."""
    if all_ops:
        return diff.table
    return diff.table[~diff.table["harness_copy"] | (diff.table["own_passed"] == False)]  # noqa: E712


def _signature(rows: pd.DataFrame) -> str:
    return ", ".join(f"{arg}={dtype}{_dims(shape)}" for arg, dtype, shape
                     in zip(rows["arg"], rows["dtype"], rows["shape"]))


def _dims(shape: object) -> list[int]:
    return [int(size) for size in shape]


def _group_reproducer(row: pd.Series, tolerance: Tolerance) -> str:
    """How to compare the blamed group's output with its graph's on the CPU again."""
    return "\n".join([
        f"group: {row['group']} output {row['output']} ({row['dtype']} {row['shape']})",
        f"ops: {', '.join(str(row['ops']).split())}",
        "  import torch",
        "  from mluverify import Tolerance, compare",
        f"  fused = torch.load({row['fused_file']!r})",
        f"  reference = torch.load({row['reference_file']!r})  # {row['against']}",
        "  fused = fused.float() if fused.is_floating_point() else fused",
        f"  print(compare(fused, reference, tolerance=Tolerance({tolerance.metric!r}, {tolerance.bound!r})).reason)",
    ])


def _reproducer(dump_dir: Path, index: pd.DataFrame, seq: int) -> str:
    """How to re-run the offending op on the CPU from the dump."""
    rows = index[index["seq"] == seq]
    first = rows.iloc[0]
    inputs = rows[rows["role"] == "input"]
    lines = [f"op: {first['op']}", f"dump: {dump_dir / first['path']}"]
    for _, row in inputs.iterrows():
        lines.append(f"  {row['arg']}: {row['dtype']} shape {_dims(row['shape'])}")
    if first["non_tensors"]:
        lines.append(f"  {first['non_tensors']}")
    if inputs["offset"].notna().any():
        lines += ["exact inputs (level 2 sidecar):",
                  "  from mluverify.dump import load, load_values",
                  f"  rows = load({str(dump_dir)!r}).query('seq == {seq} and role == \"input\"')",
                  f"  values = {{row.arg: load_values({str(dump_dir)!r}, row) "
                  f"for _, row in rows.iterrows()}}"]
    return "\n".join(lines)
