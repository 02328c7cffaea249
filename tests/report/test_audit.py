import argparse

import pytest

from mluverify.cli import audit as audit_command
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


def test_a_failing_case_makes_the_group_failing_and_never_loosens_the_bound(groups):
    relu = groups.loc["relu"]  # 0.004 fails the 0.003 bound, 0.001 passes
    assert (relu["failed"], relu["verdict"]) == (1, "failing")
    assert relu["max_passing"] == 0.001 and relu["recommended_bound"] == 0.002  # from the pass only
    assert relu["admits"] == ""  # 0.002 is tighter than the bound: it admits nothing


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
    assert csv[0].startswith("op,target,dtype,quant,metric,runs,cases,failed,p50,p90,p99,max,max_passing,bound,headroom")
    assert any(line.startswith("mm,mlu:cnml,float32,,rel_mse,2,2,0,") and line.endswith(",too loose") for line in csv)
    assert "too tight" in (tmp_path / "audit" / "audit.md").read_text()
    assert 'id="error-vs-bound"' in (tmp_path / "audit" / "audit.html").read_text()


def audit_of(rows, **options):
    return audit_runs([as_frame(rows)], **options).groups.set_index("op")


def test_errored_and_not_on_device_cases_are_not_judged():
    groups = audit_of([
        make_record("gelu[1]", 0.0001, op="gelu"), make_record("gelu[2]", 0.0002, op="gelu"),
        make_record("gelu[3]", float("nan"), op="gelu", passed=False, error="RuntimeError: boom"),
        make_record("gelu[4]", 0.05, op="gelu", status="not_on_device"),
    ])
    gelu = groups.loc["gelu"]
    assert (gelu["cases"], gelu["failed"], gelu["max"]) == (2, 0, 0.0002)
    assert gelu["verdict"] == "ok" and gelu["recommended_bound"] == 0.0004


def test_a_group_of_exact_zeros_recommends_the_exact_policy():
    relu = audit_of([make_record("relu[1]", 0.0, op="relu", max_abs=0.0),
                     make_record("relu[2]", 0.0, op="relu", max_abs=0.0)]).loc["relu"]
    assert (relu["verdict"], relu["recommended_policy"]) == ("exact", "exact")


def test_a_broken_run_cannot_talk_the_audit_into_loosening():
    # a planted 1 % bug in gelu: the failures are 0.01 against passing values near 1e-4
    rows = [make_record(f"gelu[{i}]", 1e-4, op="gelu") for i in range(3)]
    rows += [make_record(f"gelu[bug{i}]", 0.01, op="gelu") for i in range(2)]
    gelu = audit_of(rows).loc["gelu"]
    assert gelu["verdict"] == "failing"
    assert gelu["recommended_bound"] == 0.0002 and gelu["admits"] == ""


def test_a_looser_recommendation_lists_the_failures_it_would_admit():
    rows = [make_record("mul[1]", 0.0028, op="mul"), make_record("mul[2]", 0.004, op="mul"),
            make_record("mul[3]", 0.009, op="mul")]
    mul = audit_of(rows).loc["mul"]
    assert mul["recommended_bound"] == 0.0056  # 0.0028 x 2
    assert mul["admits"] == "mul[2] (0.004)"  # 0.009 stays out


def test_failures_are_blamed_on_the_device_or_on_an_ill_conditioned_reference():
    rows = [
        # the CPU's float32 sum is 50 % off float64; the device is 20 % off: the reference's fault
        make_record("sum[cancel]", 0.21, op="sum", device_error=0.2, reference_error=0.5),
        # the CPU is within 1e-7; the device is 1 % off: the device's fault
        make_record("sum[bug]", 0.01, op="sum", device_error=0.01, reference_error=1e-7),
        make_record("sum[ok]", 1e-5, op="sum", device_error=1e-5, reference_error=1e-7),
    ]
    worst = audit_runs([as_frame(rows)]).worst.set_index("case_id")
    assert worst.loc["sum[cancel]", "blame"] == "reference"
    assert worst.loc["sum[bug]", "blame"] == "device"
    assert worst.loc["sum[ok]", "blame"] == ""
