"""End of a run: merge, load, write every report through the hook, apply the gate, publish."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Mapping

from mluverify.errors import RecordsError

if TYPE_CHECKING:
    import pandas as pd
    import pluggy
    from mluverify.core.config import Settings

    from mluverify.report.completeness import RunCompleteness
    from mluverify.report.diff import RunDiff
    from mluverify.report.gate import GateResult
    from mluverify.report.spread import Spread

GATE_FILE = "gate.md"
# The terminal shows this many findings; gate.md holds them all.
PRINTED_FINDINGS = 50


def write_reports(run_dir: Path, pm: "pluggy.PluginManager", *, frame: "pd.DataFrame | None" = None,
                  gate: "GateResult | None" = None, diff: "RunDiff | None" = None) -> "pd.DataFrame":
    """Call ``mluverify_report`` of the run's plugin manager ``pm`` to write every report output
    of ``run_dir`` into it (its records loaded unless ``frame`` is given; ``gate`` / ``diff``
    when made); returns the frame."""
    from mluverify.report.loading import load

    frame = load(run_dir) if frame is None else frame
    pm.hook.mluverify_report(frame=frame, outdir=Path(run_dir), gate=gate, diff=diff)
    return frame


def finish_run(run_dir: Path, *, pm: "pluggy.PluginManager", settings: "Settings", baseline: Path | None,
               gate: bool, terminal_write: Callable[[str], None], selected: "Collection[str] | None" = None,
               publish: "Callable[[], Path] | None" = None, allow_incomplete: bool = False) -> int:
    """Merge the shards of ``run_dir``, write its reports through the run's plugin manager ``pm``
    (and a diff against ``baseline``), and when ``gate`` is set apply the gate (``selected``: what
    the run selected, see ``mluverify.report.gate.in_selection``), printing why it failed.
    ``settings`` gives the regress factor, noise floor, waivers and allowed statuses. A run that did not finish (``run.json``, see
    ``mluverify.report.completeness``) is reported as incomplete, fails the gate and forces
    exit status 1, unless ``allow_incomplete``.

    Every file is written before ``publish`` (the run-directory swap) is called; the lines
    printed after it name the published directory. Returns the exit status to force: 0, or 1
    when the gate failed or the run is incomplete. Raises RecordsError naming the culprit when
    the records cannot be merged or a report cannot be written (the shards stay in place).
    """
    from mluverify.report.completeness import completeness_of
    from mluverify.report.records import CORRUPT_KEY, read_metadata

    run_dir = Path(run_dir)
    try:
        frame = _merge_and_load(run_dir)
        metadata = read_metadata(run_dir)
        completeness, corrupt = completeness_of(metadata, frame), metadata.get(CORRUPT_KEY, [])
        refused = "" if completeness.complete or allow_incomplete else completeness.headline
        base, diff = _load_baseline(baseline, frame, run_dir, settings)
        result = _gate(frame, base, settings, selected, refused, baseline, corrupt) if gate else None
        _stamp_finished(run_dir, baseline, completeness.complete)
        write_reports(run_dir, pm, frame=frame, gate=result, diff=diff)
        if result is not None:
            _write_gate(result, run_dir)
    except OSError as exc:  # a report writer's own file (a full disk, a read-only directory)
        raise RecordsError(f"cannot write the reports of {run_dir}: {exc}") from None
    shown = publish() if publish is not None else run_dir
    for line in _corrupt_lines(corrupt, shown):
        terminal_write(line)
    status = 0 if result is None else _print_gate(result, shown, terminal_write)
    terminal_write(_run_line(frame, result, shown, completeness))
    return 1 if refused else status


def _corrupt_lines(corrupt: "Collection[str]", run_dir: Path) -> list[str]:
    """What to print of the shard lines of ``run_dir`` that were no record: each, and where
    they stay named."""
    from mluverify.report.records import META_FILE

    if not corrupt:
        return []
    return [f"mluverify: {len(corrupt)} shard line(s) held no record and were skipped (named in "
            f"{Path(run_dir) / META_FILE}; each shard kept as *.corrupt):", *(f"  {entry}" for entry in corrupt)]


def finish_empty_run(report_dir: Path, *, gate: bool, terminal_write: Callable[[str], None]) -> int:
    """A run that recorded no comparison leaves ``report_dir`` as it was; when gated it fails
    (the gate never passes vacuously). Returns the exit status to force."""
    terminal_write(f"mluverify: no comparison was recorded; {report_dir} was left as it was")
    if not gate:
        return 0
    terminal_write("mluverify gate: FAILED (empty run: the run recorded no comparison, nothing was verified)")
    return 1


def _merge_and_load(run_dir: Path) -> "pd.DataFrame":
    from mluverify.report.loading import load
    from mluverify.report.merging import merge

    merge(run_dir)
    return load(run_dir)


def _stamp_finished(run_dir: Path, baseline: Path | None, complete: bool) -> None:
    """Record in run.json when a complete run finished (once: a later ``mluverify report`` keeps
    it; an incomplete run's end is not known, so none is made up) and the baseline it was
    compared with; a directory without run metadata is left without."""
    from datetime import datetime, timezone

    from mluverify.report.records import read_metadata, write_metadata

    metadata = read_metadata(run_dir)
    if not metadata:
        return
    if complete:
        metadata.setdefault("finished", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if baseline is not None:
        metadata["baseline"] = str(baseline)
    write_metadata(run_dir, metadata)


def _load_baseline(baseline: Path | None, frame: "pd.DataFrame", run_dir: Path,
                   settings: "Settings") -> "tuple[pd.DataFrame | None, RunDiff | None]":
    """The baseline's records and the diff against them (None, None without a baseline), with
    diff.md / diff.html written into the run."""
    if baseline is None:
        return None, None
    from mluverify.report.diff import diff_runs
    from mluverify.report.loading import load
    from mluverify.report.pages import diff_documents

    base = load(baseline)
    result = diff_runs(base, frame, regress_factor=settings.regress_factor, noise_floor=settings.noise_floor,
                       spread=baseline_spread(baseline, settings))
    markdown, page = diff_documents(result, str(baseline), str(run_dir))
    write_files(run_dir, {"diff.md": markdown, "diff.html": page})
    return base, result


def baseline_spread(baseline: Path, settings: "Settings") -> "Spread | None":
    """The spread kept beside a baseline run directory (``mluverify baseline update --runs``)."""
    from mluverify.report.spread import read_spread

    return read_spread(baseline, settings.spread_sigmas) if Path(baseline).is_dir() else None


def _gate(frame: "pd.DataFrame", base: "pd.DataFrame | None", settings: "Settings",
          selected: "Collection[str] | None", incomplete: str, baseline: Path | None,
          corrupt: "Collection[str]") -> "GateResult":
    from mluverify.report.gate import evaluate_gate

    return evaluate_gate(frame, base, regress_factor=settings.regress_factor, noise_floor=settings.noise_floor,
                         waivers=settings.waivers, allow=settings.allow, selected=selected, incomplete=incomplete,
                         stale_waivers=settings.gate_fail_on_stale,
                         spread=baseline_spread(baseline, settings) if baseline is not None else None,
                         corrupt=list(corrupt))


def _run_line(frame: "pd.DataFrame", gate: "GateResult | None", run_dir: Path,
              completeness: "RunCompleteness") -> str:
    """The one-line verdict every run ends with (see ``pages.verdict_line``)."""
    from mluverify.report.pages import verdict_line
    from mluverify.report.tables import totals

    return verdict_line(totals(frame), gate, str(run_dir / "report.html"), completeness)


def _write_gate(result: "GateResult", run_dir: Path) -> None:
    """The gate's verdict and every finding (blocking first) in ``gate.md``."""
    from mluverify.report.pages import gate_table

    findings = _sorted_findings(result)
    full = gate_table(findings) if len(findings) else ""
    write_files(run_dir, {GATE_FILE: f"# mluverify gate: {_gate_verdict(result)}\n\n{full}"})


def _print_gate(result: "GateResult", run_dir: Path, terminal_write: Callable[[str], None]) -> int:
    """Print the gate's verdict and why-table (blocking findings first, cut at
    ``PRINTED_FINDINGS``; the full table is in ``gate.md``); return the exit status."""
    from mluverify.report.pages import gate_table

    findings = _sorted_findings(result)
    terminal_write(f"mluverify gate: {_gate_verdict(result)}")
    if len(findings):
        terminal_write(gate_table(findings, PRINTED_FINDINGS) + f"(full table: {run_dir / GATE_FILE})")
    return 0 if result.passed else 1


def _sorted_findings(result: "GateResult") -> "pd.DataFrame":
    return result.findings.sort_values("waiver", kind="stable")  # "" (blocking) sorts first


def _gate_verdict(result: "GateResult") -> str:
    return "passed" if result.passed else f"FAILED ({len(result.blocking)} blocking findings)"


def write_files(outdir: Path, files: Mapping[str, str]) -> list[Path]:
    """Write each ``name -> text`` of ``files`` into ``outdir``; a failure names the file."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = outdir / name
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise RecordsError(f"cannot write {path}: {exc.strerror}") from None
        paths.append(path)
    return paths
