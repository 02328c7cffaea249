"""``cpu:inductor``: one small case compiled end to end (its record carries compile time, graph
breaks and recompiles), Inductor options from the environment, and bad input (unknown options, a
compile that fails) erroring the case by name while the run goes on."""
from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify.core.case import Case, Target
from mluverify.errors import InvalidArgument
from mluverify.plugins.inductor_backend import (OPTIONS_ENV, InductorRunner, check_options, compiler_message,
                                                options_from_env)

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

CASE = Case("suites/x.py::test_y[cpu:inductor]", "y", Target("cpu", "inductor"))

# One graph break (calling a function TorchDynamo must not trace) and one recompile: the skipped
# function runs eagerly and calls `inner` with two shapes, a static-shape compile for each.
ONE_BREAK_ONE_RECOMPILE = """
    import torch

    def inner(x):
        return x.sin() + 1

    @torch._dynamo.disable(recursive=False)
    def twice(x):
        return inner(x).sum() + inner(x[:2]).sum()

    def break_and_recompile(x):
        return twice(x * 2)

    def test_case(verify):
        verify(break_and_recompile, torch.linspace(-1, 1, 8), op="break_and_recompile")
"""


def _records(run: Path) -> pd.DataFrame:
    return pd.read_parquet(run / "records.parquet").set_index("case_id")


@pytest.mark.slow
def test_a_compiled_case_records_compile_time_graph_breaks_and_recompiles(pytester):
    pytester.makepyfile(test_compiled=ONE_BREAK_ONE_RECOMPILE)
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target", "cpu:inductor", "-p", "no:cacheprovider",
                                           "--mlu-report", str(pytester.path / "run"))
    result.assert_outcomes(passed=1)
    record = _records(pytester.path / "run").loc["test_compiled.py::test_case[cpu:inductor]"]
    assert (record.status, record.executed_as) == ("passed", "partially fused")
    assert (record.graph_breaks, record.recompiles) == (1, 1)
    assert "1 graph break(s), first: Skip inlining `torch.compiler.disable()`d function" in record.not_fused_reason
    assert record.compile_s > 0 and record.duration_s > 0  # duration_s excludes compile_s: apart


def test_options_come_from_a_json_object_in_the_environment():
    assert options_from_env({}) == {}
    assert options_from_env({OPTIONS_ENV: ' {"max_autotune": true, "cpp.simdlen": 8} '}) == {
        "max_autotune": True, "cpp.simdlen": 8}
    with pytest.raises(InvalidArgument, match=rf"{OPTIONS_ENV}='max_autotune' is not JSON"):
        options_from_env({OPTIONS_ENV: "max_autotune"})
    with pytest.raises(InvalidArgument, match=rf"{OPTIONS_ENV}='\[1\]' is a JSON list, not an object"):
        options_from_env({OPTIONS_ENV: "[1]"})


def test_an_unknown_option_names_the_case_the_option_and_the_nearest_valid_one():
    with pytest.raises(InvalidArgument, match=r"^case suites/x.py::test_y\[cpu:inductor\]: unknown Inductor option "
                                              r"'max_autotun'; did you mean 'max_autotune'"):
        InductorRunner(options={"max_autotun": True})(torch.sin, (torch.ones(2),), {}, CASE)
    check_options({"max_autotune": True}, ["max_autotune"], where="x")  # a known one passes


def test_compiler_message_is_the_first_error_line_of_the_innermost_cause():
    from torch._inductor.exc import CppCompileError

    def raise_chain():  # as Inductor does: the compiler's CalledProcessError under CppCompileError, under its own
        try:
            try:
                raise subprocess.CalledProcessError(1, ["g++", "k.cpp"])
            except subprocess.CalledProcessError as failed:
                raise CppCompileError(["g++", "k.cpp"], "In file included from k.cpp:1:\nk.cpp:7:3: error: boom\nmore") from failed
        except CppCompileError as inner:
            raise RuntimeError("backend='inductor' raised:\nCppCompileError: C++ compile error") from inner

    with pytest.raises(RuntimeError) as raised:
        raise_chain()
    assert compiler_message(raised.value) == "CppCompileError: k.cpp:7:3: error: boom"
    assert compiler_message(ValueError("\n  first line\nsecond")) == "ValueError: first line"


FAKE_COMPILER = """#!/bin/sh
case "$1" in --version|-dumpversion) exec g++ "$@";; esac
echo "fake-g++: fatal error: simulated compiler failure" >&2
exit 1
"""


@pytest.mark.slow
def test_a_failing_compile_errors_its_case_by_name_and_the_run_goes_on(pytester, monkeypatch):
    compiler = pytester.path / "fake-g++"
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"cpp.cxx": [None, str(compiler)]}))
    pytester.makepyfile(test_two="""
        import torch

        def test_exp(verify):
            verify(torch.exp, torch.linspace(-2, 2, 64), op="exp")

        def test_cos(verify):
            verify(torch.cos, torch.linspace(-2, 2, 64), op="cos")
    """)
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target", "cpu:inductor", "--mlu-target",
                                           "cpu64:eager", "-p", "no:cacheprovider",
                                           "--mlu-report", str(pytester.path / "run"))
    result.assert_outcomes(passed=2, failed=2)
    records = _records(pytester.path / "run")
    assert sorted(records.status) == ["errored", "errored", "passed", "passed"]
    for test in ("test_exp", "test_cos"):
        case_id = f"test_two.py::{test}[cpu:inductor]"
        assert (f"BackendError: case {case_id}: TorchInductor failed to compile it: CppCompileError: "
                f"fake-g++: fatal error: simulated compiler failure") in records.loc[case_id, "error"]
