"""Ceilings per record kind (``max_by_kind``): a fused group's inner values err more than the
case's outputs, so a waiver caps each kind apart and a single loose ceiling no longer hides an
output error. End to end, an ``addmm`` planted 10 % off on ``mlu:cnml`` (through
``mluverify_device_kernels``) under ``max = 0.05, max_by_kind = { group = 0.18 }``: the output
fails as "waived but worsened", the group record with the very same error stays waived."""
from __future__ import annotations

import datetime as dt

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

from mluverify.core.expectations import (WAIVED_BUT_WORSENED, load_expectations, make_waiver, marker_fields,
                                         parse_waivers)
from mluverify.errors import ConfigError
from mluverify.report.expectations_check import check_expectations
from mluverify.report.gate import evaluate_gate

TODAY = dt.date(2026, 1, 1)
CAPPED = {"reason": "int16 gates", "until": "2099-01-01", "category": "quantization", "max": 0.05,
          "max_by_kind": {"group": 0.18}}


def test_each_kind_is_held_to_its_own_ceiling_and_others_to_max():
    waiver = make_waiver("int16 gates", "2099-01-01", 0.05, max_by_kind={"group": 0.18})
    assert waiver.over_ceiling(0.1, "output") and waiver.over_ceiling(0.1, "grad")
    assert not waiver.over_ceiling(0.1, "group") and waiver.over_ceiling(0.19, "group")
    assert waiver.worsened("rel_mse", 0.19, "group") == (f"{WAIVED_BUT_WORSENED}: rel_mse 0.19 > the waiver's "
                                                         f"ceiling max_by_kind.group 0.18 (int16 gates)")
    # the marker's fields rebuild it (suites turn file waivers into mlu_waiver marks)
    fields = marker_fields(waiver)
    assert make_waiver(waiver.reason, waiver.until, fields.pop("max"), **fields) == waiver


@pytest.mark.parametrize("by_kind, message", [
    ({"groups": 0.1}, "max_by_kind names unknown record kind 'groups'; valid: output, grad, param, group"),
    ({"group": -1}, r"max_by_kind.group=-1 must be a number >= 0"),
    ({"group": "0.1"}, r"max_by_kind.group='0.1' must be a number >= 0"),
    (0.18, "max_by_kind=0.18 must be a table of record kind = ceiling"),
])
def test_a_bad_ceiling_by_kind_names_the_waiver_and_the_choices(by_kind, message):
    with pytest.raises(ConfigError, match=rf"\[waivers\]: waiver 'rnn\[\*\]'.*{message}"):
        parse_waivers({"rnn[*]": {**CAPPED, "max_by_kind": by_kind}}, "[waivers]")


def _records(rows: list[dict]):
    from mluverify.report.records import to_table

    return to_table([{"run_id": "run", "op": "op", "metric": "rel_mse", "bound": 0.003, "target": "mlu:cnml",
                      "core_version": "MLU270", "passed": False, "waived": False, "status": "failed", **row}
                     for row in rows]).to_pandas()


def test_the_gate_holds_each_record_of_a_case_to_its_kinds_ceiling():
    run = _records([{"case_id": "rnn[a]", "kind": "output", "value": 0.01},
                    {"case_id": "rnn[a]", "kind": "group", "value": 0.12},   # both under their ceilings
                    {"case_id": "rnn[b]", "kind": "output", "value": 0.1},   # over max, under the group's
                    {"case_id": "rnn[b]", "kind": "group", "value": 0.12}])
    findings = evaluate_gate(run, waivers=parse_waivers({"rnn[*]": CAPPED}), today=TODAY).blocking
    assert list(zip(findings["rule"], findings["case_id"])) == [(WAIVED_BUT_WORSENED, "rnn[b]")]
    assert findings["detail"].iloc[0] == ("rnn[*]: waived but worsened: value 0.1 > the waiver's ceiling max 0.05 "
                                          "(int16 gates)")


def test_expectations_check_gives_the_worst_value_per_kind_and_flags_the_kind_above_its_ceiling(tmp_path):
    path = tmp_path / "waivers.toml"
    path.write_text('[waivers]\n"rnn[*]" = { reason = "int16 gates", until = "2099-01-01", category = '
                    '"quantization", max = 0.05, max_by_kind = { group = 0.18 } }\n')
    run = _records([{"case_id": "rnn[a]", "kind": "output", "value": 0.06},
                    {"case_id": "rnn[a]", "kind": "group", "value": 0.12}])
    (check,) = check_expectations(run, [load_expectations(path)], TODAY)
    assert dict(check.worst_by_kind) == {"output": 0.06, "group": 0.12}
    assert check.problems == ["above its ceiling: worst output value 0.06 > max 0.05"]


SUITE = """
import pytest, torch, torch.nn as nn

@pytest.mark.mlu_waiver("int16 gates", "2099-01-01", category="quantization", max=0.05, max_by_kind={"group": 0.18})
def test_fused_layer(verify):
    torch.manual_seed(0)
    # a bound no float result meets: every comparison fails it, and the waiver decides
    verify(nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), torch.randn(4, 8), op="fused_layer", tolerance=1e-30)
"""

# The fused (cnml) addmm 10 % too large: the ReLU after it keeps the scale, so the output and the
# value inside the fusion group are both 10 % off (rel_mse 0.1: sqrt(sum((0.1 e)^2) / sum(e^2)))
ADDMM_TEN_PERCENT_HIGH = """
from mluverify import hookimpl

def _addmm_ten_percent_high(self, mat1, mat2, *, beta=1, alpha=1):
    import torch
    return torch.ops.aten.addmm.default(self, mat1, mat2, beta=beta, alpha=alpha) * 1.1

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::addmm", _addmm_ten_percent_high, mode="cnml")
"""


@pytest.mark.slow
def test_a_planted_output_error_above_max_but_under_the_group_ceiling_fails_as_waived_but_worsened(pytester):
    pytester.makepyfile(test_fused=SUITE, addmm_ten_percent_high=ADDMM_TEN_PERCENT_HIGH)
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "addmm_ten_percent_high", "--mlu-target=mlu:cnml",
                                           f"--mlu-report={pytester.path / 'run'}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    records = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().set_index("kind")
    output, group = records.loc["output"], records.loc["group"]
    assert output["value"] == pytest.approx(0.1, rel=1e-3) and output["status"] == "failed"
    assert output["reason"].startswith(f"{WAIVED_BUT_WORSENED}: rel_mse 0.1 > the waiver's ceiling max 0.05")
    # the same 10 % inside the fusion group is under the group's own ceiling: still waived
    assert group["value"] == pytest.approx(0.1, rel=1e-3) and group["status"] == "waived"
    assert group["leaf"].startswith("MLUFusionGroup0.addmm")
