"""The dumper suite writes its dump-diff reports into the run being built (``mlu_run_dir``):
after a run they are in the finished run directory, and the previous run, swapped to
``<dir>.prev``, holds exactly what it held before."""
import shutil
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pytest

SUITE = Path(__file__).parents[2] / "suites" / "dumper" / "test_dumper.py"
REPORTS = ("dump_diff.csv", "dump_diff.md", "dump_diff.html")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=mlu:cnnl",
                                         f"--mlu-report={pytester.path / 'run'}", *args)


def tree(directory: Path) -> dict[str, int]:
    """Every file under ``directory``, with its modification time."""
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize("args", [[], pytest.param(["-n", "2"], marks=pytest.mark.heavy)], ids=["one-process", "xdist"])
def test_dump_reports_go_to_the_finished_run_and_not_the_previous_one(pytester, args):
    shutil.copy(SUITE, pytester.path / SUITE.name)
    first = run(pytester, "-k", "float32")
    assert first.ret == 0, first.stdout.str()
    before = tree(pytester.path / "run")
    assert {Path(name).name for name in before if name.startswith("dumps/")} == set(REPORTS)

    second = run(pytester, *args)
    assert second.ret == 0, second.stdout.str()
    assert tree(pytester.path / "run.prev") == before  # the previous run: untouched
    dumps = pytester.path / "run" / "dumps"
    # one directory per case, named after the test id ([mlu:cnnl-MLU270-float16] -> _mlu_cnnl-...)
    assert sorted(p.name.rpartition("-")[2] for p in dumps.iterdir()) == ["float16_", "float32_"]
    for case in dumps.iterdir():
        assert sorted(p.name for p in case.iterdir()) == sorted(REPORTS)
    assert not (pytester.path / "run.running").exists()
