"""Noise-aware regressions and the opt-in gate on stale waivers.

A baseline taken from three runs keeps each case's spread: a noisy case's "worsened" limit
widens to mean + 3 x spread, a quiet one keeps the fixed factor (the spread never tightens it).
``gate_fail_on_stale = true`` makes the gate fail on a waiver whose cases all pass; by default
it does not."""
import argparse
import datetime as dt

import pytest

from mluverify.cli import baseline as baseline_command
from mluverify.core.config import Settings, parse_settings
from mluverify.core.expectations import Waiver
from mluverify.errors import ConfigError, RecordsError
from mluverify.report import finish_run
from mluverify.report.spread import SPREAD_FILE

from report_records import make_record, write_run

# Three baseline runs. noisy: 1.0e-3, 1.4e-3, 0.6e-3 -> mean 1.0e-3, sample std
# sqrt((0 + 0.4e-3^2 + 0.4e-3^2) / 2) = 0.4e-3, limit 1.0e-3 + 3 x 0.4e-3 = 2.2e-3 (> 1.5 x 1.0e-3).
# quiet: 1.0e-3 three times -> spread 0, limit stays 1.5 x 1.0e-3 = 1.5e-3.
# slightly: 1.0e-3, 1.05e-3, 0.95e-3 -> std 0.05e-3, 1.15e-3 < 1.5e-3: the factor's limit is kept.
BASELINE_RUNS = {"noisy": (1.0e-3, 1.4e-3, 0.6e-3), "quiet": (1.0e-3,) * 3, "slightly": (1.0e-3, 1.05e-3, 0.95e-3)}


def update(*argv):
    parser = argparse.ArgumentParser()
    baseline_command.register(parser.add_subparsers())
    args = parser.parse_args(["baseline", "update", *map(str, argv)])
    return args.func(args)


def three_run_baseline(tmp_path):
    runs = [write_run(tmp_path / f"run{i}", [make_record(f"t[{name}]", values[i], bound=0.01)
                                             for name, values in BASELINE_RUNS.items()]) for i in range(3)]
    assert update("--runs", *runs, "--to", tmp_path / "baseline") == 0
    return tmp_path / "baseline"


def gate_findings(tmp_path, report_pm, baseline, values, **settings):
    run = write_run(tmp_path / "new", [make_record(f"t[{name}]", value, bound=0.01) for name, value in values.items()])
    lines = []
    status = finish_run(run, pm=report_pm, settings=Settings(**settings), baseline=baseline, gate=True,
                        terminal_write=lines.append)
    return status, (run / "gate.md").read_text()


def test_a_noisy_metric_widens_its_limit_a_quiet_one_does_not(tmp_path, report_pm, capsys):
    baseline = three_run_baseline(tmp_path)
    assert (baseline / SPREAD_FILE).exists()
    assert "spread of 3 cases over 3 runs" in capsys.readouterr().out
    # noisy at 2.0e-3: over 1.5 x 1.0e-3, under 2.2e-3 -> not worsened; quiet at 1.6e-3 and
    # slightly at 1.6e-3: over 1.5e-3 -> worsened
    status, gate = gate_findings(tmp_path, report_pm, baseline, {"noisy": 2.0e-3, "quiet": 1.6e-3, "slightly": 1.6e-3})
    assert status == 1
    assert "| worsened | t[quiet] |" in gate and "| worsened | t[slightly] |" in gate and "t[noisy]" not in gate
    assert "0.0016 > 1.5 x baseline 0.001" in gate
    # slightly at 1.4e-3: its spread's 1.15e-3 never tightens the factor's 1.5e-3
    status, gate = gate_findings(tmp_path, report_pm, baseline, {"noisy": 2.3e-3, "quiet": 1.0e-3, "slightly": 1.4e-3})
    assert "| worsened | t[noisy] |" in gate and "t[slightly]" not in gate
    assert "0.0023 > 0.0022 = mean 0.001 + 3 x spread 0.0004 over 3 baseline runs" in gate


def test_without_the_spread_the_fixed_factor_decides(tmp_path, report_pm):
    baseline = three_run_baseline(tmp_path)
    assert update("--from", tmp_path / "run0", "--to", baseline) == 0  # one run: the spread goes
    assert not (baseline / SPREAD_FILE).exists()
    status, gate = gate_findings(tmp_path, report_pm, baseline, {"noisy": 2.0e-3, "quiet": 1.0e-3, "slightly": 1.0e-3})
    assert "| worsened | t[noisy] |" in gate and "0.002 > 1.5 x baseline 0.001" in gate


def test_a_spread_needs_two_runs(tmp_path):
    run = write_run(tmp_path / "run0", [make_record("t[a]", 1e-3)])
    with pytest.raises(RecordsError, match="a spread needs at least two runs"):
        update("--runs", run, "--to", tmp_path / "baseline")


TODAY = dt.date.today()


def test_stale_waivers_fail_the_gate_only_when_asked(tmp_path, report_pm):
    waivers = {"t[fixed]": Waiver("was off by 1 ulp", TODAY + dt.timedelta(days=30), category="device bug")}
    run = write_run(tmp_path / "run", [make_record("t[fixed]", 1e-4)])  # the waived case passes now
    lines = []
    assert finish_run(run, pm=report_pm, settings=Settings(waivers=waivers), baseline=None, gate=True,
                      terminal_write=lines.append) == 0
    status = finish_run(run, pm=report_pm, settings=Settings(waivers=waivers, gate_fail_on_stale=True), baseline=None,
                        gate=True, terminal_write=lines.append)
    assert status == 1
    assert "| stale waiver | t[fixed] |" in (run / "gate.md").read_text()


def test_the_keys_are_checked():
    assert parse_settings({"gate_fail_on_stale": True, "spread_sigmas": 2}).spread_sigmas == 2.0
    with pytest.raises(ConfigError, match="gate_fail_on_stale = 'yes' must be true or false"):
        parse_settings({"gate_fail_on_stale": "yes"})
    with pytest.raises(ConfigError, match="spread_sigmas = -1 must be >= 0"):
        parse_settings({"spread_sigmas": -1})
