"""End of a run: merge, load, write every report through the hook, apply the gate."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from mluverify.errors import MluverifyError, RecordsError

if TYPE_CHECKING:
    import pandas as pd
    import pluggy
    from mluverify.config import Waiver

    from mluverify.report.gate import GateResult

GATE_FILE = "gate.md"
# The terminal shows this many findings; gate.md holds them all.
PRINTED_FINDINGS = 50


def write_reports(run_dir: Path, pm: "pluggy.PluginManager | None" = None) -> "pd.DataFrame":
    """Load the records of ``run_dir`` and call ``mluverify_report`` to write every report output
    into it; returns the records frame."""
    from mluverify.plugin_manager import call_hook, get_plugin_manager
    from mluverify.report.loading import load

    frame = load(run_dir)
    call_hook(pm or get_plugin_manager(), "mluverify_report", frame=frame, outdir=Path(run_dir))
    return frame


def finish_run(run_dir: Path, *, pm: "pluggy.PluginManager", baseline: Path | None, gate: bool,
               regress_factor: float, noise_floor: float, waivers: "Mapping[str, Waiver]",
               terminal_write: Callable[[str], None]) -> int:
    """Merge the shards of ``run_dir``, write its reports (and a diff against ``baseline``), and
    when ``gate`` is set apply the gate, printing why it failed.

    Returns the exit status to force: 0 when fine, 1 when the gate failed or the reports could
    not be made (the error is printed; shards stay in place for ``mluverify report --merge``).
    """
    try:
        frame = _merge_and_report(Path(run_dir), pm)
        base = _load_baseline(baseline, frame, Path(run_dir), regress_factor, noise_floor)
        terminal_write(_run_line(frame, Path(run_dir)))
        if not gate:
            return 0
        result = _gate(frame, base, regress_factor, noise_floor, waivers)
    except (MluverifyError, OSError) as exc:  # OSError: e.g. the run directory cannot be created
        terminal_write(f"mluverify: reports failed: {exc}")
        return 1
    return _print_gate(result, Path(run_dir), terminal_write)


def _merge_and_report(run_dir: Path, pm: "pluggy.PluginManager") -> "pd.DataFrame":
    from mluverify.report.records import merge

    # A session that collected nothing wrote no shard; it still gets (empty) records, so the
    # gate can say so instead of failing on a missing directory.
    run_dir.mkdir(parents=True, exist_ok=True)
    merge(run_dir)
    return write_reports(run_dir, pm)


def _load_baseline(baseline: Path | None, frame: "pd.DataFrame", run_dir: Path,
                   regress_factor: float, noise_floor: float) -> "pd.DataFrame | None":
    """The baseline's records (None without one), with diff.md / diff.html written into the run."""
    if baseline is None:
        return None
    from mluverify.report.diff import diff_runs
    from mluverify.report.loading import load
    from mluverify.report.pages import diff_documents

    base = load(baseline)
    result = diff_runs(base, frame, regress_factor=regress_factor, noise_floor=noise_floor)
    markdown, page = diff_documents(result, str(baseline), str(run_dir))
    write_files(run_dir, {"diff.md": markdown, "diff.html": page})
    return base


def _gate(frame: "pd.DataFrame", base: "pd.DataFrame | None", regress_factor: float,
          noise_floor: float, waivers: "Mapping[str, Waiver]") -> "GateResult":
    from mluverify.report.gate import evaluate_gate

    return evaluate_gate(frame, base, regress_factor=regress_factor, noise_floor=noise_floor,
                         waivers=waivers)


def _run_line(frame: "pd.DataFrame", run_dir: Path) -> str:
    passed = frame["passed"].fillna(False).astype(bool)
    waived = frame["waived"].fillna(False).astype(bool)
    return (f"mluverify: {len(frame)} records, {int((~passed & ~waived).sum())} failed, "
            f"{int((~passed & waived).sum())} waived; report: {run_dir / 'report.html'}")


def _print_gate(result: "GateResult", run_dir: Path, terminal_write: Callable[[str], None]) -> int:
    """Print the gate's verdict and why-table (blocking findings first, cut at
    ``PRINTED_FINDINGS``), keep the full table in ``gate.md``; return the exit status."""
    from mluverify.report.pages import gate_table

    findings = result.findings.sort_values("waiver", kind="stable")  # "" (blocking) sorts first
    verdict = "passed" if result.passed else f"FAILED ({len(result.blocking)} blocking findings)"
    full = gate_table(findings) if len(findings) else ""
    write_files(run_dir, {GATE_FILE: f"# mluverify gate: {verdict}\n\n{full}"})
    terminal_write(f"mluverify gate: {verdict}")
    if len(findings):
        terminal_write(gate_table(findings, PRINTED_FINDINGS) + f"(full table: {run_dir / GATE_FILE})")
    return 0 if result.passed else 1


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
