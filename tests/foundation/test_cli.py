"""The mluverify command line: options before or after paths, pass-through after --."""
from mluverify.cli import build_parser
from mluverify.cli.run import pytest_arguments


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
