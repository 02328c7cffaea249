"""The mluverify command line: options before or after paths, pass-through after --."""
import sys

import pytest

from mluverify.cli import build_parser
from mluverify.cli.run import pytest_arguments

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e


def parse(*argv):
    return build_parser().parse_args(argv)


def test_run_options_may_follow_the_paths(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suites" / "ops").mkdir(parents=True)
    args = parse("run", "suites/ops", "--report", "out", "--target", "mlu:cnnl", "--workers", "0")
    # JUnit XML is written into the run while it is built, so it is swapped in with it
    assert pytest_arguments(args) == ["-p", "mluverify", "suites/ops", "--mlu-target=mlu:cnnl",
                                      "--mlu-report=out", "--junitxml=out.running/junit.xml"]


def test_arguments_after_double_dash_go_to_pytest(monkeypatch):
    from mluverify import cli

    seen = {}
    monkeypatch.setattr("mluverify.cli.run.run", lambda args: seen.setdefault("argv", pytest_arguments(args)) and 0)
    cli.main(["run", "--workers", "0", "--", "-k", "softmax", "-x"])
    assert seen["argv"][-3:] == ["-k", "softmax", "-x"]


@pytest.mark.parametrize("argv, named", [
    (["diff", "a", "b", "--regress-factor", "-1"], "--regress-factor: -1 must be >= 1"),
    (["diff", "a", "b", "--regress-factor", "0.5"], "--regress-factor: 0.5 must be >= 1"),
    (["diff", "a", "b", "--noise-floor", "-3"], "--noise-floor: -3 must be >= 0"),
    (["diff", "a", "b", "--noise-floor", "nan"], "--noise-floor: nan must be >= 0"),
    (["diff", "a", "b", "--noise-floor", "tiny"], "--noise-floor: 'tiny' is not a number"),
    (["audit", "a", "--safety-factor", "-3"], "--safety-factor: -3 must be >= 1"),
    (["audit", "a", "--safety-factor", "inf"], "--safety-factor: inf must be finite"),
    (["audit", "a", "--safety-factor", "nan"], "--safety-factor: nan must be >= 1"),
    (["run", "--workers", "-1"], "--workers: '-1' is no worker count: pass a number >= 0 (0: none) or 'auto'"),
    (["run", "--workers", "many"], "--workers: 'many' is no worker count"),
])
def test_a_bad_option_value_is_a_usage_error_naming_option_and_value(argv, named, capsys):
    from mluverify import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert named in capsys.readouterr().err


def test_worker_counts_and_auto_are_accepted(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert pytest_arguments(parse("run", "--workers", "3", "--report", "out"))[-2:] == ["-n", "3"]
    assert "-n" not in pytest_arguments(parse("run", "--workers", "0", "--report", "out"))
    assert parse("run").workers == "auto"


def test_an_option_at_its_keys_bound_is_accepted():
    # the bounds are the keys' (regress_factor >= 1, noise_floor >= 0): the bound itself is valid
    args = parse("diff", "a", "b", "--regress-factor", "1", "--noise-floor", "0")
    assert (args.regress_factor, args.noise_floor) == (1.0, 0.0)
    assert parse("audit", "a", "--safety-factor", "1").safety_factor == 1.0


ONE_CASE = """
import torch


def test_add(verify):
    verify(torch.add, torch.ones(3), torch.ones(3))
"""


def mluverify_run(pytester, *args):
    pytester.makepyfile(test_add=ONE_CASE)
    return pytester.run(sys.executable, "-m", "mluverify.cli", "run", "--workers", "0",
                        "--target", "cpu64:eager", *args)


def test_an_unknown_run_target_exits_2_naming_it(pytester):
    result = mluverify_run(pytester, "--target", "mlu:cnnx")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["*unknown target 'mlu:cnnx'; valid:*'mlu:cnnl'*"])


@pytest.mark.parametrize("selection", [["-k", "nomatch"], ["--collect-only"]])
def test_a_run_that_verified_nothing_leaves_no_staging_dir(pytester, selection):
    result = mluverify_run(pytester, "--", *selection)
    reports = pytester.path / "reports"
    assert not (reports / "latest.running").exists()
    assert "latest.running" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*generated xml file: (none: the run verified nothing)*"])


def test_a_run_prints_the_published_junit_path_and_no_rewrite_warning(pytester):
    result = mluverify_run(pytester)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*generated xml file: reports/latest/junit.xml*"])
    assert (pytester.path / "reports" / "latest" / "junit.xml").is_file()
    assert not (pytester.path / "reports" / "latest.running").exists()
    assert "PytestAssertRewriteWarning" not in result.stdout.str() + result.stderr.str()


def test_a_run_that_records_nothing_never_points_at_the_previous_runs_junit(pytester):
    assert mluverify_run(pytester).ret == 0  # the previous run, with its junit.xml
    pytester.makepyfile(test_add="""
import pytest

def test_add(verify):
    pytest.skip("records nothing")
""")
    result = pytester.run(sys.executable, "-m", "mluverify.cli", "run", "--workers", "0", "--target", "cpu64:eager")
    assert "generated xml file: reports/latest/junit.xml" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*generated xml file: (none: the run verified nothing)*"])
