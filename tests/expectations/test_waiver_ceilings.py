"""Waiver ceilings: a waived comparison whose judged value is above its waiver's ``max`` is not
excused, in the run (the record fails, "waived but worsened") and at the gate (for a configured
waiver as for one a run applied); every accuracy waiver in the repository has a ceiling. End to
end, a ReLU backward planted wrong at exactly 0 (through ``mluverify_device_kernels``) under a
waiver is caught by its ceiling."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

from mluverify.core.expectations import WAIVED_BUT_WORSENED, load_waivers, make_waiver, parse_waivers

TODAY = dt.date(2026, 1, 1)


def test_a_value_above_the_ceiling_is_over_it_and_no_value_is_not():
    waiver = make_waiver("int16 products", "2099-01-01", 0.05, category="quantization")
    assert waiver.over_ceiling(0.051) and not waiver.over_ceiling(0.05) and not waiver.over_ceiling(float("nan"))
    assert not make_waiver("r", "2099-01-01").over_ceiling(1e9)  # no ceiling: nothing is over it
    assert waiver.worsened("rel_mse", 1.26) == (f"{WAIVED_BUT_WORSENED}: rel_mse 1.26 > the waiver's ceiling "
                                                f"max 0.05 (int16 products)")


def test_only_a_waiver_of_a_value_needs_a_ceiling():
    assert make_waiver("r", "2099-01-01", category="quantization").needs_ceiling
    assert make_waiver("r", "2099-01-01").needs_ceiling  # uncategorised: it may excuse anything
    assert not make_waiver("no kernel", "2099-01-01", category="unsupported").needs_ceiling
    assert not make_waiver("raises", "2099-01-01", skip=True, category="device bug").needs_ceiling


def _records(rows: list[dict]):
    from mluverify.report.records import to_table

    return to_table([{"run_id": "run", "op": "op", "metric": "rel_mse", "bound": 0.003, "target": "mlu:cnnl",
                      "core_version": "MLU270", "passed": False, "waived": row["status"] == "waived", **row}
                     for row in rows]).to_pandas()


def _blocking(run, waivers=None):
    from mluverify.report.gate import evaluate_gate

    blocking = evaluate_gate(run, waivers=waivers or {}, today=TODAY).blocking
    return sorted(zip(blocking["rule"], blocking["case_id"]))


def test_the_gate_excuses_a_configured_waiver_only_up_to_its_ceiling():
    run = _records([{"case_id": "t.py::test_mm[a]", "value": 0.04, "status": "failed"},
                    {"case_id": "t.py::test_mm[b]", "value": 1.26, "status": "failed"}])
    waivers = parse_waivers({"t.py::test_mm[*]": {"reason": "int16", "until": "2099-01-01", "max": 0.05,
                                                  "category": "quantization"}})
    assert _blocking(run, waivers) == [(WAIVED_BUT_WORSENED, "t.py::test_mm[b]")]
    from mluverify.report.gate import evaluate_gate

    detail = evaluate_gate(run, waivers=waivers, today=TODAY).blocking["detail"].iloc[0]
    assert detail == "t.py::test_mm[*]: waived but worsened: value 1.26 > the waiver's ceiling max 0.05 (int16)"


def test_the_gate_fails_a_record_its_waiver_did_not_excuse_as_waived_but_worsened():
    reason = f"{WAIVED_BUT_WORSENED}: rel_mse 1.26 > the waiver's ceiling max 0.05 (int16); rel_mse 1.26 > bound 0.003"
    run = _records([{"case_id": "t.py::test_mm[b]", "value": 1.26, "status": "failed", "reason": reason,
                     "waiver_reason": "int16", "waiver_until": "2099-01-01"},
                    {"case_id": "t.py::test_mm[c]", "value": 0.04, "status": "waived", "waiver_reason": "int16",
                     "waiver_until": "2099-01-01"}])
    assert _blocking(run) == [(WAIVED_BUT_WORSENED, "t.py::test_mm[b]")]


def test_every_accuracy_waiver_of_the_repository_has_a_ceiling():
    from mluverify.cli.expectations import DEFAULT_FILES
    from mluverify.core.config import load_settings

    root = Path(__file__).parents[2]
    waivers = dict(load_settings(root / "pyproject.toml").waivers)
    for name in DEFAULT_FILES:
        waivers.update({f"{name}: {key}": w for key, w in load_waivers(root / name, skippable=True).items()})
    uncapped = [key for key, waiver in waivers.items() if waiver.needs_ceiling and waiver.max is None]
    assert waivers and uncapped == []


SUITE = """
import pytest, torch, torch.nn as nn

@pytest.mark.mlu_waiver("known deviation", "2099-01-01", max=0.05, category="quantization")
def test_waived_step(verify):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(48, 5))
    # a bound no float result meets: every comparison fails it, and the waiver decides
    verify(model, torch.randn(2, 2, 6, 6), op="small", grad=True, tolerance=1e-30)
"""

# ReLU's backward wrong at exactly 0: it passes the gradient where the ReLU output is 0, that
# is wherever the input was negative
RELU_OPEN_AT_ZERO = """
from mluverify import hookimpl

def _threshold_backward_open_at_zero(grad_output, self, threshold):
    import torch
    return torch.where(self >= threshold, grad_output, torch.zeros_like(grad_output))

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::threshold_backward", _threshold_backward_open_at_zero)
"""


def _run(pytester, *plugins):
    pytester.makepyfile(test_waived=SUITE, relu_open_at_zero=RELU_OPEN_AT_ZERO)
    result = pytester.runpytest_subprocess("-p", "mluverify", *plugins, f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnnl", "--mlu-core-version=MLU270",
                                           "-p", "no:cacheprovider")
    return result, pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().set_index("leaf")


@pytest.mark.slow
def test_a_planted_relu_backward_bug_under_a_waiver_is_caught_by_its_ceiling(pytester):
    result, planted = _run(pytester, "-p", "relu_open_at_zero")
    result.assert_outcomes(failed=1)
    upstream = ["input.grad", "0.weight.grad", "0.bias.grad"]  # the convolution's, before the ReLU
    assert (planted.loc[upstream, "status"] == "failed").all() and (planted.loc[upstream, "value"] > 0.05).all()
    assert planted.loc[upstream, "reason"].str.startswith(f"{WAIVED_BUT_WORSENED}: rel_mse").all()
    # after the ReLU nothing changed: the waiver still excuses those, under its ceiling
    after = planted.loc[["output", "3.weight.grad"]]
    assert (after.status == "waived").all() and (after.value <= 0.05).all()
    result.stdout.fnmatch_lines(["*failed: waived but worsened: rel_mse * > the waiver's ceiling max 0.05*"])
