import argparse

import pytest

from mluverify.cli import diff as diff_command
from mluverify.report.diff import diff_runs

from report_records import as_frame, make_record, write_run

BASE = [
    make_record("t[new_fail]", 0.001),
    make_record("t[fixed]", 0.005),
    make_record("t[worse]", 0.001),
    make_record("t[better]", 0.002),
    make_record("t[same]", 0.001),
    make_record("t[gone]", 0.001),
    make_record("m[still]", 0.004, op="mul"),
]
NEW = [
    make_record("t[new_fail]", 0.0035),
    make_record("t[fixed]", 0.001),
    make_record("t[worse]", 0.002),     # 2x > 1.5x
    make_record("t[better]", 0.001),    # base is 2x new
    make_record("t[same]", 0.0012),     # 1.2x: unchanged
    make_record("t[added]", 0.001),
    make_record("m[still]", 0.006, op="mul"),
]


@pytest.fixture
def result():
    return diff_runs(as_frame(BASE), as_frame(NEW), regress_factor=1.5)


def test_every_case_gets_its_status(result):
    status = dict(zip(result.cases["case_id"], result.cases["status"]))
    assert status == {
        "t[new_fail]": "new failure", "t[fixed]": "fixed", "t[worse]": "worsened",
        "t[better]": "improved", "t[same]": "unchanged", "t[gone]": "missing",
        "t[added]": "added", "m[still]": "still failing",
    }
    assert result.regressed


def test_counts_cover_every_status(result):
    assert result.counts() == {"new failure": 1, "worsened": 1, "missing": 1, "still failing": 1,
                               "fixed": 1, "improved": 1, "added": 1, "unchanged": 1}


def test_ratio_is_new_over_base(result):
    ratio = result.cases.set_index("case_id")["ratio"]
    assert ratio["t[worse]"] == pytest.approx(2.0)
    assert ratio["t[better]"] == pytest.approx(0.5)


def test_per_op_deltas(result):
    add = result.groups.set_index("op").loc["add"]
    # base add values: .001 .005 .001 .002 .001 .001 -> median 0.001, max 0.005
    # new add values: .0035 .001 .002 .001 .0012 .001 -> sorted .001 .001 .001 .0012 .002 .0035
    assert (add["cases_base"], add["cases_new"]) == (6, 6)
    assert add["median_base"] == pytest.approx(0.001)
    assert add["median_new"] == pytest.approx(0.0011)
    assert add["median_delta"] == pytest.approx(0.0001)
    assert add["max_ratio"] == pytest.approx(0.0035 / 0.005)
    assert result.groups.set_index("op").loc["mul", "median_delta"] == pytest.approx(0.002)


def test_no_regression_when_only_improved_or_fixed():
    result = diff_runs(as_frame([make_record("t[a]", 0.004)]), as_frame([make_record("t[a]", 0.001)]))
    assert not result.regressed


def _run_cli(*argv):
    parser = argparse.ArgumentParser()
    diff_command.register(parser.add_subparsers())
    args = parser.parse_args(["diff", *map(str, argv)])
    return args.func(args)


def test_cli_writes_markdown_and_html_and_exits_1_on_regression(tmp_path, capsys):
    base, new = write_run(tmp_path / "base", BASE), write_run(tmp_path / "new", NEW)
    assert _run_cli(base, new, "--out", tmp_path / "out") == 1
    markdown = (tmp_path / "out" / "diff.md").read_text()
    assert "## New failure cases" in markdown and "t[new_fail]" in markdown
    assert "| 1 | 1 | 1 | 1 | 1 | 1 | 1 | 1 |" in markdown
    assert "t[worse]" in (tmp_path / "out" / "diff.html").read_text()
    printed = capsys.readouterr().out.splitlines()
    # a short summary and the page's path, not the whole markdown
    assert printed[0].startswith("mluverify diff: REGRESSED; since the baseline: 1 new failure, 1 worsened, 1 missing")
    assert printed[1].startswith(f"full page: {tmp_path / 'out' / 'diff.html'}") and len(printed) == 2


def test_cli_exits_0_without_regression(tmp_path):
    rows = [make_record("t[a]", 0.001)]
    assert _run_cli(write_run(tmp_path / "b", rows), write_run(tmp_path / "n", rows)) == 0
    assert (tmp_path / "n" / "diff.md").exists()
