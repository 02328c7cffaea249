"""The gate's ``missing`` rule is scoped by what the run selected: the tests a ``-k`` kept, or
the paths and node ids it was given (a baseline case of a file the run was not asked to run is
no loss); the pytest plugin states that selection for its run."""
from pathlib import Path

import pytest

from mluverify.pytest_plugin.run import selected_paths
from mluverify.report.gate import evaluate_gate

from report_records import as_frame, make_record

BASELINE = ["a/test_a.py::test_add[x]", "a/test_a.py::test_add[x]#2", "a/test_a.py::test_sub[x]",
            "a/sub/test_c.py::test_div[x]", "b/test_b.py::test_mul[x]"]


def missing(selected):
    base = as_frame([make_record(case_id, 0.001) for case_id in BASELINE])
    result = evaluate_gate(as_frame([make_record("a/test_a.py::test_add[x]", 0.001)]), base, selected=selected)
    return sorted(result.blocking.loc[result.blocking["rule"] == "missing", "case_id"])


def test_a_path_scopes_the_missing_cases_to_what_lies_under_it():
    assert missing(["a"]) == ["a/sub/test_c.py::test_div[x]", "a/test_a.py::test_add[x]#2", "a/test_a.py::test_sub[x]"]
    assert missing(["a/test_a.py"]) == ["a/test_a.py::test_add[x]#2", "a/test_a.py::test_sub[x]"]
    assert missing(["a/test_a.py::test_add"]) == ["a/test_a.py::test_add[x]#2"]
    assert missing(["b"]) == ["b/test_b.py::test_mul[x]"]  # the run's own case is no finding either way
    assert missing(None) == ["a/sub/test_c.py::test_div[x]", "a/test_a.py::test_add[x]#2", "a/test_a.py::test_sub[x]",
                             "b/test_b.py::test_mul[x]"]


def test_a_selected_test_holds_its_second_comparison():
    # -k keeps test ids; "test_add[x]#2" is the second comparison of the selected test_add[x]
    assert missing(["a/test_a.py::test_add[x]"]) == ["a/test_a.py::test_add[x]#2"]
    assert missing(["a/test_a.py::test_add[x]", "b/test_b.py::test_mul[x]"]) == [
        "a/test_a.py::test_add[x]#2", "b/test_b.py::test_mul[x]"]


@pytest.mark.parametrize("args, selection", [
    (["a"], ["a"]),
    (["a/", "./b/test_b.py::test_mul"], ["a", "b/test_b.py::test_mul"]),
    (["sub"], ["a/sub"]),  # from the invocation directory a/
    (["."], None),  # the whole rootdir
    (["../.."], None),  # outside it: nothing can be scoped
    (["a", "mluverify.suites"], None),  # --pyargs: a package, no path
])
def test_the_paths_a_run_was_given_become_node_id_prefixes(tmp_path, args, selection):
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "test_b.py").write_text("")
    base = tmp_path / "a" if args == ["sub"] else tmp_path
    assert selected_paths(args, base, tmp_path) == selection


def test_a_run_given_a_path_misses_only_the_baseline_cases_under_it(pytester):
    from report_records import write_run

    pytester.mkpydir("a").joinpath("test_a.py").write_text(
        "import torch\n\ndef test_add(verify):\n    verify(torch.add, torch.ones(4), torch.ones(4), op='add')\n")
    cases = ["a/test_a.py::test_add[cpu64:eager]", "a/test_a.py::test_gone[cpu64:eager]", "b/test_b.py::test_mul[cpu64:eager]"]
    base = write_run(pytester.path / "base", [make_record(case_id, 0.0, target="cpu64:eager") for case_id in cases])
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'run'}", f"--mlu-baseline={base}",
                                           "--mlu-gate", "a")
    assert result.ret == 1  # test_gone, deleted from a/, is missing; b/ was not asked for
    result.stdout.fnmatch_lines(["*mluverify gate: FAILED (1 blocking findings)*", "*| missing | a/test_a.py::test_gone*"])
    assert "b/test_b.py" not in result.stdout.str()
    assert (pytester.path / "run" / "selected.txt").read_text() == "a\n"  # `mluverify report --gate` scopes alike
