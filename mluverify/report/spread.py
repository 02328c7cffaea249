"""Noise-aware regressions: each case's judged metric measured over repeated runs of the baseline.

``mluverify baseline update --runs A B C`` keeps, beside the baseline's records, the mean and
the spread (sample standard deviation) of every case's judged value over the runs
(``spread.parquet``: ``CASE_KEY``, ``metric``, ``runs``, ``mean``, ``spread``). The gate and
``diff`` then call a case *worsened* when its value exceeds

    max(regress_factor x max(baseline, noise_floor), mean + sigmas x spread)

so a metric that varies from run to run by more than the fixed factor allows gets a limit as
wide as its measured noise, and a quiet one (spread 0, or below the factor) keeps the fixed
factor: the spread only widens, never tightens, and never below the noise floor. A case whose
metric differs from the one measured, or that was in fewer than two runs, keeps the factor.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from mluverify.errors import RecordsError
from mluverify.report.tables import CASE_KEY, case_outcomes

if TYPE_CHECKING:
    import pandas as pd

SPREAD_FILE = "spread.parquet"
SPREAD_COLUMNS = [*CASE_KEY, "metric", "runs", "mean", "spread"]


@dataclass(frozen=True)
class Spread:
    """Per case the mean and spread of its judged metric (``SPREAD_COLUMNS``) and how many
    spreads above the mean a value may go (``sigmas``) before it is worsened."""

    cases: "pd.DataFrame"
    sigmas: float = 3.0

    def limits(self, metric: "pd.Series") -> "pd.DataFrame":
        """``mean``, ``spread``, ``runs`` and the limit ``mean + sigmas x spread`` of the cases
        of ``metric`` (a series of metric names indexed by ``CASE_KEY``); the limit is NaN where
        no spread of that metric was measured."""
        measured = self.cases.set_index(CASE_KEY)
        measured = measured[~measured.index.duplicated()].reindex(metric.index)
        same = (measured["metric"] == metric).to_numpy()
        limit = (measured["mean"] + self.sigmas * measured["spread"]).where(same)
        return measured.assign(limit=limit)[["mean", "spread", "runs", "limit"]]


def measure_spread(frames: Sequence["pd.DataFrame"]) -> "pd.DataFrame":
    """The spread of each case's judged value (its worst record's) over the runs ``frames``:
    one row per case and metric present with a finite value in at least two runs."""
    import pandas as pd

    values = pd.concat([case_outcomes(frame)[["metric", "value"]].reset_index() for frame in frames],
                       ignore_index=True)
    values = values[values["value"].notna() & (values["value"].abs() != float("inf"))]
    grouped = values.groupby([*CASE_KEY, "metric"], sort=True)["value"]
    spread = grouped.agg(runs="size", mean="mean", spread="std").reset_index()
    return spread[spread["runs"] >= 2][SPREAD_COLUMNS].reset_index(drop=True)


def write_spread(directory: Path, spread: "pd.DataFrame") -> Path:
    """Write ``spread.parquet`` into ``directory`` atomically (a temporary file, then a rename)."""
    import os

    target = Path(directory) / SPREAD_FILE
    tmp = target.with_name(f".{SPREAD_FILE}.tmp-{os.getpid()}")
    try:
        spread.to_parquet(tmp, index=False)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RecordsError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def read_spread(baseline: Path, sigmas: float) -> Spread | None:
    """The spread kept beside the baseline ``baseline`` (a run directory), or None without one."""
    import pandas as pd

    path = Path(baseline) / SPREAD_FILE
    if not path.is_file():
        return None
    try:
        cases = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise RecordsError(f"baseline spread {path} is corrupt: {exc}") from None
    missing = set(SPREAD_COLUMNS) - set(cases.columns)
    if missing:
        raise RecordsError(f"baseline spread {path} lacks the columns {sorted(missing)}; rewrite it with "
                           f"`mluverify baseline update --runs`")
    return Spread(cases, sigmas)
