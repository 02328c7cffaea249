"""The ``tune`` page: what ``mluverify tune`` changed and every trial that led there.

Renders the plain data the tuner writes (``tune.json``: status, bound, metric, the answer in
the seeds' terms and the trajectory), so the report imports neither torch nor the tuner.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from mluverify.report.render import Chip, TableSpec, html_banner, html_code, html_facts, html_page, html_table

TUNE_PAGE = "tune.html"
PASSED, FAILED = "within bound", "breaks bound"
TRIAL_COLUMNS = ("trial", "phase", "outcome", "metric", "changed", "changes", "seconds")
_SPEC = TableSpec(shown=TRIAL_COLUMNS, long={"changes": 40}, tone="outcome", order=(PASSED, FAILED))
_ATTRIBUTION = ("attribution (largest first; a layer: the output's error with it alone quantized; an op: its own "
                "error in the dump)")
_TONE = {"within-bound": "good", "tuned": "good", "impossible": "bad", "budget-spent": "bad"}


def _trial_rows(trials: list[Mapping[str, Any]]) -> "pd.DataFrame":
    import pandas as pd

    rows = [{"trial": t["index"], "phase": t["phase"], "outcome": PASSED if t["passed"] else FAILED,
             "metric": t["metric"], "changed": len(t["changes"]),
             "changes": ", ".join(f"{k}={v}" for k, v in t["changes"].items()) or "(none)",
             "seconds": round(t["seconds"], 2)} for t in trials]
    return pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))


def tune_page_html(result: Mapping[str, Any]) -> str:
    """The page for one tuning result (the mapping ``tune.json`` holds)."""
    trials = _trial_rows(list(result["trials"]))
    passed = int((trials["outcome"] == PASSED).sum())
    banner = html_banner(result["message"], _TONE.get(result["status"], "muted"),
                         [Chip(PASSED, passed, "tune-trials"), Chip(FAILED, len(trials) - passed, "tune-trials")],
                         [f"{result['strategy']} search, {len(trials)} of {result['budget']} trials, "
                          f"{result['seconds']:.1f} s; bound: {result['metric_name']} <= {result['bound']:g}"])
    facts = html_facts([("model script", result.get("script", "")), ("target", result.get("target", "")),
                        ("status", result["status"]), ("final metric", result["metric"]),
                        ("changes", len(result["changes"]))])
    answer = html_code(json.dumps(result["answer"], indent=2))
    scores = "\n".join(f"{key}: {value:.4g}" for key, value in
                       sorted(result.get("scores", {}).items(), key=lambda item: -item[1]))
    sections = [("result", facts), ("the answer in the seeds' terms", answer),
                ("trajectory", html_table(trials, "tune-trials", _SPEC)),
                (_ATTRIBUTION, html_code(scores or "(not computed)"))]
    return html_page(f"mluverify tune: {result.get('script', '')}", banner, sections)


def write_tune_page(result: Mapping[str, Any], outdir: str | Path) -> Path:
    """Write ``tune.html`` for ``result`` into ``outdir``; returns its path."""
    path = Path(outdir) / TUNE_PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tune_page_html(result))
    return path


__all__ = ["TRIAL_COLUMNS", "TUNE_PAGE", "tune_page_html", "write_tune_page"]
