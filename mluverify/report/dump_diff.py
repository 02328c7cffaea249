"""The dump-diff reports of a dump (``mluverify.dump.dump_diff``): its headline, the CSV (every
op), markdown and HTML page (``write_dump_diff_pages``), and the judgement of the case a run dumped
(``case_error``, from the run's records). See docs/dumper.md and docs/reports.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from mluverify.judge import GOLDEN, Tolerance

from mluverify.report.loading import load as load_records
from mluverify.report.render import (
    Chip, TableSpec, format_number, html_banner, html_code, html_facts, html_page, html_table, markdown_table,
)
from mluverify.report.tables import dump_dir as recorded_dump

if TYPE_CHECKING:  # mluverify.dump imports torch: imported where a dump is at hand
    from mluverify.dump import CaseError, DumpDiff

OUTPUTS = ("dump_diff.csv", "dump_diff.md", "dump_diff.html")
GROUPS_CSV = "dump_diff_groups.csv"  # a fused run's fusion groups, written when the dump has some


def case_error(dump_dir: str | os.PathLike[str]) -> CaseError | None:
    """The judgement of the case a run dumped into ``dump_dir`` (``<run>/dumps/<case>``, made by
    ``--mlu-dump=fail``), from the run's records; None for a dump outside a run."""
    dump_dir = Path(dump_dir)
    run_dir = dump_dir.resolve().parent.parent
    if dump_dir.resolve().parent.name != "dumps" or not (run_dir / "records.parquet").exists():
        return None
    records = load_records(run_dir)
    mine = records[records["reproducer"].map(recorded_dump) == f"dumps/{dump_dir.resolve().name}"]
    if mine.empty:
        return None
    return recorded_case_error(mine.sort_values("headroom", na_position="first").iloc[0])


def recorded_case_error(record: Mapping[str, Any]) -> CaseError:
    """A case's judgement from its record (a records row): what it was judged by, and its
    resolved tolerance from the ``tolerance_*`` columns (None where they are empty)."""
    from mluverify.dump import CaseError

    return CaseError(record["metric"], float(record["value"]), float(record["bound"]), record["status"],
                     record["mode"], _recorded_tolerance(record))


def _recorded_tolerance(record: Mapping[str, Any]) -> Tolerance | None:
    metric, bound = record.get("tolerance_metric"), record.get("tolerance_bound")
    if not isinstance(metric, str) or not metric or bound is None or bound != bound:
        return None
    source = record.get("tolerance_source") or ""
    if metric == GOLDEN:
        return Tolerance("rel_mse", float(bound), source, golden=True)
    return Tolerance(metric, float(bound), source)


def headline(diff: DumpDiff) -> str:
    """One line: the first offender (a fusion group, else an op) and its own error, that the
    output error is left unexplained, or that nothing breaks the bound."""
    group = diff.first_group
    if group is not None:
        return (f"first offender: fusion group {group['group']} output {group['output']} (ops: "
                f"{', '.join(dict.fromkeys(str(group['ops']).split()))}): own {group['reason']} against "
                f"{group['against']}")
    if diff.verdict == "blamed":
        row = diff.table[diff.table["seq"] == diff.first_offender].iloc[0]
        if row["nan_mismatch"] > 0:
            own = (f"{int(row['nan_mismatch'])} NaN/Inf positions where the CPU has none "
                   f"(or the reverse)")
        else:
            own = f"own {diff.metric} {_number(row['own_value'])} > {diff.bound:g} ({diff.source})"
        return (f"first offender: {row['path']} ({row['op']}): {own}, inherited "
                f"{_number(row['inherited_rel_mse'])}")
    judged = int(diff.table["own_passed"].notna().sum())
    within = f"no op's own error breaks {diff.metric} <= {diff.bound:g} ({diff.source}); {judged} ops judged"
    if len(diff.groups):
        within += f", and no fusion group's ({len(diff.groups)} group outputs judged, {diff.group_source})"
    if diff.verdict == "clean":
        return within
    if diff.case is not None:
        output = (f"the case failed ({diff.case.metric} {_number(diff.case.value)} > bound "
                  f"{_number(diff.case.bound)})")
    else:
        output = f"the output's total rel_mse is {_number(diff.output_rel_mse)}"
    return (f"unexplained: {output}, but {within}: the error builds up over several ops or lies "
            f"outside the dumped ops")


def judged_by(diff: DumpDiff) -> str:
    """The tolerance each op was judged with and where it came from (and why it is not the
    case's own, when it is not)."""
    used = f"{diff.metric} <= {diff.bound:g} ({diff.source})"
    return f"{used}: {diff.note}" if diff.note else used


def _number(value: float) -> str:
    return format_number(float(value))


def to_markdown(diff: DumpDiff, all_ops: bool = False) -> str:
    """The report as markdown: headline, reproducer, then the op table (``shown_table``)."""
    from mluverify.dump import shown_table

    shown = shown_table(diff, all_ops)
    parts = [f"# dump-diff {diff.dump_dir}", "", headline(diff), "", f"Each op judged by {judged_by(diff)}.", ""]
    if diff.reproducer:
        parts += ["```", diff.reproducer, "```", ""]
    if len(diff.groups):
        parts += ["## Fusion groups", "", GROUPS_NOTE, "", markdown_table(diff.groups), "", "## Ops, run layer by layer",
                  ""]
    if len(shown) < len(diff.table):
        parts += [f"{len(diff.table) - len(shown)} of the harness's own copies and device moves "
                  f"left out (`--all-ops` lists them).", ""]
    parts.append(markdown_table(shown))
    return "\n".join(parts)


def to_html(diff: DumpDiff) -> str:
    """The dump-diff page, in the look of every mluverify page: the headline as its banner,
    the reproducer (copy button), and the op table (harness copies behind a switch)."""
    from mluverify.dump import shown_table

    table = diff.table.assign(
        judged=diff.table["own_passed"].map({True: "within bound", False: "breaks bound"}).fillna("not judged"),
        hidden=~diff.table.index.isin(shown_table(diff).index),
    )
    counts = table["judged"].value_counts()
    chips = [Chip(label, int(counts.get(label, 0)), "ops") for label in JUDGED]
    tone = {"blamed": "bad", "unexplained": "bad", "clean": "good"}[diff.verdict]
    spec = TableSpec(shown=SHOWN_COLUMNS, tone="judged", order=JUDGED, long={"inputs": 24}, hide="hidden",
                     hide_label=f"show the harness's copies and device moves ({int(table['hidden'].sum())})",
                     page=1000)
    facts = [("dump", diff.dump_dir), ("mode", diff.mode), ("each op judged by", judged_by(diff)),
             ("output's total error", diff.output_rel_mse)]
    if diff.case is not None:
        facts += [("case", f"{diff.case.status}: {diff.case.metric} {_number(diff.case.value)}, "
                           f"bound {_number(diff.case.bound)}")]
    sections = [("Dump", html_facts(facts))]
    if diff.reproducer:
        sections.append(("Reproducer of the first offender", html_code(diff.reproducer)))
    if len(diff.groups):
        groups = diff.groups.assign(judged=diff.groups["own_passed"].map({True: "within bound", False: "breaks bound"}))
        group_spec = TableSpec(shown=GROUP_SHOWN_COLUMNS, tone="judged", order=JUDGED, long={"ops": 40}, page=1000)
        sections.append(("Fusion groups (fused outputs vs the group's own graph on the CPU)",
                         f"<p>{GROUPS_NOTE}</p>" + html_table(groups, "groups", group_spec)))
    sections.append(("Ops in execution order", html_table(table, "ops", spec)))
    return html_page(f"mluverify dump-diff: {diff.dump_dir.name}", html_banner(headline(diff), tone, chips), sections)


JUDGED = ("breaks bound", "within bound", "not judged")
GROUP_SHOWN_COLUMNS = ("group", "output", "judged", "ops", "shape", "dtype", "own_value", "bound", "reason")
GROUPS_NOTE = ("A fused run cannot be dumped op by op (under the Dumper it runs layer by layer): each fusion "
               "group's outputs are judged against the group's own graph run on the CPU in float32 on the same "
               "inputs (FUSED_KERNEL_DEBUG=cpu, saved in fused_groups/). The op table is the same call run "
               "layer by layer, where a fused kernel never runs.")
# The page's op table (the CSV has every column).
SHOWN_COLUMNS = ("seq", "path", "op", "judged", "inputs", "own_rel_mse", "inherited_rel_mse", "total_rel_mse",
                 "bound", "nan_mismatch", "own_max_abs", "own_max_rel", "own_cosine", "cpu_error")


def write_dump_diff_pages(diff: DumpDiff, outdir: str | os.PathLike[str], all_ops: bool = False) -> list[Path]:
    """Write the CSV (every op), markdown and HTML reports into ``outdir``, and the fusion
    groups' CSV when the dump has groups; their paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path, html_path = (outdir / name for name in OUTPUTS)
    diff.table.to_csv(csv_path, index=False)
    md_path.write_text(to_markdown(diff, all_ops), encoding="utf-8")
    html_path.write_text(to_html(diff), encoding="utf-8")
    if not len(diff.groups):
        return [csv_path, md_path, html_path]
    diff.groups.to_csv(outdir / GROUPS_CSV, index=False)
    return [csv_path, md_path, html_path, outdir / GROUPS_CSV]
