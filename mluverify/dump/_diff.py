"""A dump taken with ``use_cpu`` as a per-op error table, and its first offender.

Each op's **own** error is its device output against the CPU re-run on the same inputs;
the error it **inherited** is how far its inputs already were from a CPU-only run. The
first op (in execution order) whose own error breaks the tolerance is where accuracy was
lost; ops after it mostly carry inherited error and are not blamed.
"""
from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mluverify.compare import policy
from mluverify.dump._index import load
from mluverify.errors import RecordsError

OUTPUTS = ("dump_diff.csv", "dump_diff.md", "dump_diff.html")
_METRICS = ("rae", "rma", "max_abs", "max_rel", "cosine", "sqnr_db")


@dataclass(frozen=True)
class DumpDiff:
    """The per-op error table of a dump and what it blames."""

    dump_dir: Path
    mode: str
    metric: str
    bound: float
    table: pd.DataFrame  # one row per dumped op, in execution order
    first_offender: int | None  # seq of the first op whose own error breaks the bound
    reproducer: str | None


def dump_diff(dump_dir: str | os.PathLike[str], mode: str = "cnnl") -> DumpDiff:
    """Per-op own / inherited / total error of a ``use_cpu`` dump, judged by ``mode``'s policy."""
    tolerance = policy(mode)
    index = load(dump_dir)
    if "inherited_rel_mse" not in index.columns:
        raise RecordsError(f"{Path(dump_dir)}: dumped without use_cpu, so there is no CPU "
                           f"result to compare with; dump again with Dumper(..., use_cpu=True)")
    # A dump whose ops had no floating result has no metric columns at all.
    index = index.reindex(columns=[*index.columns, *(
        column for column in ("rel_mse", "nan_mismatch", "cpu_error", *_METRICS)
        if column not in index.columns)])
    table = _op_table(index, tolerance.bound)
    breaking = table[table["own_passed"] == False]  # noqa: E712 (NaN means not judged)
    first = None if breaking.empty else int(breaking["seq"].iloc[0])
    reproducer = None if first is None else _reproducer(Path(dump_dir), index, first)
    return DumpDiff(Path(dump_dir), mode, tolerance.metric, tolerance.bound, table, first,
                    reproducer)


def _op_table(index: pd.DataFrame, bound: float) -> pd.DataFrame:
    results = index[index["role"] == "result"].drop_duplicates("seq")
    inputs = index[index["role"] == "input"]
    signatures = inputs.groupby("seq")[["arg", "dtype", "shape"]].apply(_signature)
    table = pd.DataFrame({
        "seq": results["seq"].to_numpy(),
        "path": results["path"].to_numpy(),
        "op": results["op"].to_numpy(),
        "inputs": signatures.reindex(results["seq"]).fillna("").to_numpy(),
        "own_rel_mse": results["rel_mse"].to_numpy(dtype=float),
        "inherited_rel_mse": results["inherited_rel_mse"].to_numpy(dtype=float),
        "total_rel_mse": results["total_rel_mse"].to_numpy(dtype=float),
    })
    table["bound"] = bound
    own = table["own_rel_mse"]
    # NaN/Inf where the CPU has finite values (or the reverse) fails whatever the rel_mse.
    table["nan_mismatch"] = results["nan_mismatch"].to_numpy(dtype=float)
    passed = (own <= bound) & ~(table["nan_mismatch"] > 0)
    table["own_passed"] = passed.astype(object).where(own.notna(), None)
    for metric in _METRICS:
        table[f"own_{metric}"] = results[metric].to_numpy(dtype=float)
    table["cpu_error"] = results["cpu_error"].to_numpy()
    return table.sort_values("seq", kind="stable").reset_index(drop=True)


def _signature(rows: pd.DataFrame) -> str:
    return ", ".join(f"{arg}={dtype}{_dims(shape)}" for arg, dtype, shape
                     in zip(rows["arg"], rows["dtype"], rows["shape"]))


def _dims(shape: object) -> list[int]:
    return [int(size) for size in shape]


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


def headline(diff: DumpDiff) -> str:
    """One line: the first offender and its own vs inherited error, or that there is none."""
    if diff.first_offender is None:
        judged = int(diff.table["own_passed"].notna().sum())
        return (f"no op's own error breaks {diff.metric} <= {diff.bound:g} ({diff.mode}); "
                f"{judged} ops judged")
    row = diff.table[diff.table["seq"] == diff.first_offender].iloc[0]
    if row["nan_mismatch"] > 0:
        own = (f"{int(row['nan_mismatch'])} NaN/Inf positions where the CPU has none "
               f"(or the reverse)")
    else:
        own = f"own {diff.metric} {row['own_rel_mse']:.4g} > {diff.bound:g} ({diff.mode})"
    return (f"first offender: {row['path']} ({row['op']}): {own}, inherited "
            f"{row['inherited_rel_mse']:.4g}")


def to_markdown(diff: DumpDiff) -> str:
    """The report as markdown: headline, reproducer, then the table."""
    parts = [f"# dump-diff {diff.dump_dir}", "", headline(diff), ""]
    if diff.reproducer:
        parts += ["```", diff.reproducer, "```", ""]
    parts.append(_markdown_table(diff.table))
    return "\n".join(parts) + "\n"


def _markdown_table(table: pd.DataFrame) -> str:
    columns = list(table.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for values in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(value) for value in values) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value).replace("|", "\\|")


def to_html(diff: DumpDiff) -> str:
    """A self-contained page: headline, reproducer and the table, the offender highlighted."""
    def highlight(row: pd.Series) -> list[str]:
        style = "background:#fdd" if row["seq"] == diff.first_offender else ""
        return [style] * len(row)

    table = diff.table.style.apply(highlight, axis=1).format(precision=4, na_rep="").to_html()
    reproducer = f"<pre>{html.escape(diff.reproducer)}</pre>" if diff.reproducer else ""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>dump-diff</title></head>"
            f"<body><h1>dump-diff {html.escape(str(diff.dump_dir))}</h1>"
            f"<p><b>{html.escape(headline(diff))}</b></p>{reproducer}{table}</body></html>\n")


def write_reports(diff: DumpDiff, outdir: str | os.PathLike[str]) -> list[Path]:
    """Write the CSV, markdown and HTML reports into ``outdir``; their paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path, html_path = (outdir / name for name in OUTPUTS)
    diff.table.to_csv(csv_path, index=False)
    md_path.write_text(to_markdown(diff), encoding="utf-8")
    html_path.write_text(to_html(diff), encoding="utf-8")
    return [csv_path, md_path, html_path]
