"""The mluverify command line: options before or after paths, pass-through after --."""
from mluverify.cli import build_parser
from mluverify.commands.run import pytest_arguments


def parse(*argv):
    return build_parser().parse_args(argv)


def test_run_options_may_follow_the_paths():
    args = parse("run", "suites/ops", "--report", "out", "--target", "mlu:cnnl", "--workers", "0")
    assert pytest_arguments(args) == ["-p", "mluverify", "suites/ops", "--mlu-target=mlu:cnnl",
                                      "--mlu-report=out", "--junitxml=out/junit.xml"]


def test_arguments_after_double_dash_go_to_pytest(monkeypatch):
    from mluverify import cli

    seen = {}
    monkeypatch.setattr("mluverify.commands.run.run", lambda args: seen.setdefault("argv", pytest_arguments(args)) and 0)
    cli.main(["run", "--workers", "0", "--", "-k", "softmax", "-x"])
    assert seen["argv"][-3:] == ["-k", "softmax", "-x"]
