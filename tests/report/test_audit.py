import argparse

import pytest

from mluverify.commands import audit as audit_command
from mluverify.report.audit import audit_runs, round_up

from report_records import as_frame, make_record, write_run

RUN1 = [
    make_record("add[1]", 0.0008, run_id="r1"),
    make_record("add[2]", 0.0010, run_id="r1"),
    make_record("conv[1]", 0.0025, op="conv", run_id="r1"),
    make_record("mm[1]", 0.00010, op="mm", target="mlu:cnml", bound=0.02, run_id="r1"),
    make_record("relu[1]", 0.004, op="relu", run_id="r1"),
]
RUN2 = [
    make_record("add[1]", 0.0012, run_id="r2"),
    make_record("conv[1]", 0.0028, op="conv", run_id="r2"),
    make_record("mm[1]", 0.00015, op="mm", target="mlu:cnml", bound=0.02, run_id="r2"),
    make_record("relu[1]", 0.001, op="relu", run_id="r2"),
]


@pytest.fixture
def groups():
    return audit_runs([as_frame(RUN1), as_frame(RUN2)], safety_factor=2.0).groups.set_index("op")


def test_quantiles_bound_headroom_and_recommendation(groups):
    add = groups.loc["add"]  # values .0008 .0010 .0012 across two runs
    assert (add["runs"], add["cases"], add["failed"]) == (2, 3, 0)
    assert add["p50"] == pytest.approx(0.0010)
    assert add["p90"] == pytest.approx(0.0010 + 0.8 * 0.0002)  # position 0.9 * 2 = 1.8
    assert add["max"] == pytest.approx(0.0012)
    assert add["headroom"] == pytest.approx(0.003 / 0.0012)
    assert add["recommended_bound"] == 0.0024
    assert add["verdict"] == "ok"


def test_headroom_under_1_2_is_too_tight(groups):
    conv = groups.loc["conv"]
    assert conv["headroom"] == pytest.approx(0.003 / 0.0028)  # 1.07
    assert conv["recommended_bound"] == 0.0056
    assert conv["verdict"] == "too tight"


def test_a_failing_case_is_too_tight(groups):
    assert groups.loc["relu", "failed"] == 1
    assert groups.loc["relu", "verdict"] == "too tight"


def test_headroom_over_100_is_too_loose(groups):
    mm = groups.loc["mm"]
    assert mm["headroom"] == pytest.approx(0.02 / 0.00015)  # 133
    assert mm["recommended_bound"] == 0.0003
    assert mm["verdict"] == "too loose"


@pytest.mark.parametrize("value, expected", [
    (0.002468, 0.0025), (0.0025, 0.0025), (0.00251, 0.0026), (123.0, 130.0), (9.91, 10.0), (0.0, 0.0),
])
def test_round_up_to_two_significant_digits(value, expected):
    assert round_up([value])[0] == expected


def test_worst_inputs_per_group_largest_first():
    worst = audit_runs([as_frame(RUN1), as_frame(RUN2)], worst_per_group=2).worst
    add = worst[worst["op"] == "add"]
    assert add[["run_id", "case_id"]].values.tolist() == [["r2", "add[1]"], ["r1", "add[2]"]]
    assert add["reproducer"].tolist() == ["pytest 'add[1]'", "pytest 'add[2]'"]


def test_cli_writes_csv_markdown_html(tmp_path):
    runs = [write_run(tmp_path / "r1", RUN1), write_run(tmp_path / "r2", RUN2)]
    parser = argparse.ArgumentParser()
    audit_command.register(parser.add_subparsers())
    args = parser.parse_args(["audit", *map(str, runs), "--out", str(tmp_path / "audit")])
    assert args.func(args) == 0
    csv = (tmp_path / "audit" / "audit.csv").read_text().splitlines()
    assert csv[0].startswith("op,target,dtype,metric,runs,cases,failed,p50,p90,p99,max,bound,headroom")
    assert any(line.startswith("mm,mlu:cnml,float32,rel_mse,2,2,0,") and line.endswith(",too loose") for line in csv)
    assert "too tight" in (tmp_path / "audit" / "audit.md").read_text()
    assert 'id="error-distribution"' in (tmp_path / "audit" / "audit.html").read_text()
