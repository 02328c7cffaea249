"""`pytest -p mluverify` end to end, in subprocesses (pytester), on torch-device back ends."""
import sys
import textwrap

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

ADD_SUITE = """
import pytest, torch

@pytest.mark.parametrize("n", range({count}))
def test_add(verify, n):
    torch.manual_seed(n)
    verify(torch.add, torch.randn(8), torch.randn(8), op="add", seed=n)
"""

# A back end whose results are 1 % off, registered from conftest.py like any third-party plugin.
SCALED_BACKEND = """
from mluverify import Backend, Execution, Tolerance, hookimpl

class Scaled(Backend):
    name = "scaled"
    modes = {"cnnl": "cnnl", "cnml": "cnml"}

    def execute(self, fn, args, kwargs, *, case):
        # a device move on the CPU: provenance, not the op under test (which would be not_on_device)
        return Execution(fn(*args, **kwargs) * 1.01, ("aten::_to_copy",))

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Scaled())

@hookimpl
def mluverify_tolerance(case):
    if case.op == "hooked":
        return Tolerance("rel_mse", 0.05, "hook")
"""

SCALED_SUITE = """
import pytest, torch

def test_plain(verify):
    verify(torch.mul, torch.ones(4), 2.0)

@pytest.mark.mlu_tolerance(0.02)
def test_marked(verify):
    verify(torch.mul, torch.ones(4), 2.0)

def test_hooked(verify):
    verify(torch.mul, torch.ones(4), 2.0, op="hooked")

@pytest.mark.mlu_waiver("known 1 % scale error", "2999-01-01")
def test_waived(verify):
    verify(torch.mul, torch.ones(4), 2.0)

@pytest.mark.mlu_waiver("known 1 % scale error", "2000-01-01")
def test_expired(verify):
    verify(torch.mul, torch.ones(4), 2.0)
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}", *args)


def records(pytester):
    return pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()


def test_a_run_writes_one_record_per_comparison(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=5))
    result = run(pytester, "--mlu-target=cpu64:eager")
    result.assert_outcomes(passed=5)
    frame = records(pytester)
    assert len(frame) == 5
    assert set(frame["target"]) == {"cpu64:eager"} and frame["passed"].all()
    assert sorted(frame["seed"]) == list(range(5))
    assert frame["run_id"].nunique() == 1


def test_xdist_workers_lose_no_record(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=40))
    result = run(pytester, "--mlu-target=cpu64:eager", "-n", "2")
    result.assert_outcomes(passed=40)
    frame = records(pytester)
    assert len(frame) == 40 and frame["case_id"].nunique() == 40
    assert frame["run_id"].nunique() == 1


def test_unknown_target_is_a_usage_error_listing_valid_targets(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    result = run(pytester, "--mlu-target=tpu:fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown target 'tpu:fast'*cpu64:eager*"])


def test_unavailable_target_is_skipped_with_its_reason(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    result = run(pytester, "--mlu-target=cuda:eager", "-rs")
    if "torch.cuda.is_available() is False" not in result.stdout.str():
        pytest.skip("this machine has CUDA")
    result.assert_outcomes(skipped=1)


def test_tolerances_waivers_and_fallbacks_through_a_conftest_backend(pytester):
    pytester.makeconftest(SCALED_BACKEND)
    pytester.makepyfile(test_scaled=SCALED_SUITE)
    result = run(pytester, "--mlu-target=scaled:cnnl", "--mlu-target=scaled:cnml", "-rxf")
    # cnnl (0.3 %): plain and expired fail, waived xfails, marked and hooked pass;
    # cnml (2 %): all five pass
    result.assert_outcomes(passed=7, failed=2, xfailed=1)
    result.stdout.fnmatch_lines(["*waiver expired on 2000-01-01*"])
    frame = records(pytester).set_index("case_id")
    plain = frame.loc["test_scaled.py::test_plain[scaled:cnnl]"]
    assert not plain["passed"] and plain["value"] == pytest.approx(0.01)
    assert plain["fallback_ops"] == "aten::_to_copy"
    assert frame.loc["test_scaled.py::test_marked[scaled:cnnl]", "bound"] == 0.02
    assert frame.loc["test_scaled.py::test_hooked[scaled:cnnl]", "bound"] == 0.05
    assert frame.loc["test_scaled.py::test_waived[scaled:cnnl]", "waived"]
    assert not frame.loc["test_scaled.py::test_expired[scaled:cnnl]", "waived"]


def test_a_plugin_whose_hook_raises_is_named(pytester):
    pytester.makeconftest("""
from mluverify import hookimpl

@hookimpl
def mluverify_add_backends(registry):
    raise RuntimeError("no licence")
""")
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*plugin 'conftest'*raised in hook mluverify_add_backends*no licence*"])


def test_unwritable_or_foreign_report_dirs_are_refused_at_start(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    (pytester.path / "blocker").write_text("a file, not a directory")
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'blocker' / 'run'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*report directory*blocker*not writable*"])
    foreign = pytester.path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={foreign}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_a_killed_runs_records_stay_beside_the_run_and_merge_later(pytester):
    pytester.makepyfile(test_crash=ADD_SUITE.format(count=3) + """
def test_zz_crash():
    import os
    os._exit(3)  # the process dies: no session finish, no merge
""")
    result = run(pytester, "--mlu-target=cpu64:eager", "-p", "no:randomly")
    assert result.ret == 3
    assert not (pytester.path / "run").exists()  # never replaced by a run that did not finish
    staging = pytester.path / "run.running"
    merged = pytester.run(sys.executable, "-m", "mluverify.cli", "report", str(staging))
    assert merged.ret == 1  # merged and reported, as what it is: incomplete (3 of the 4 tests ran)
    merged.stdout.fnmatch_lines(["mluverify: incomplete: 3 of 4 tests (killed*"])
    assert len(pq.read_table(staging / "records.parquet")) == 3


def test_mlu_dump_fail_dumps_each_failing_case_into_the_report(pytester):
    pytester.makeconftest(SCALED_BACKEND)
    pytester.makepyfile(test_scaled=SCALED_SUITE)
    result = run(pytester, "--mlu-target=scaled:cnnl", "--mlu-dump=fail", "-k", "plain or marked")
    result.assert_outcomes(passed=1, failed=1)
    dumps = list((pytester.path / "run" / "dumps").iterdir())
    assert len(dumps) == 1 and "test_plain" in dumps[0].name  # only the failing case
    op_dirs = sorted(p.name for p in dumps[0].iterdir() if p.is_dir())
    assert any(name.endswith("_mul") for name in op_dirs), op_dirs
    plain = records(pytester).set_index("case_id").loc["test_scaled.py::test_plain[scaled:cnnl]"]
    # relative to the run directory: the run is built beside it and renamed at its end
    assert f"dump: {dumps[0].relative_to(pytester.path / 'run')}" in plain["reproducer"]


def test_an_unknown_core_version_in_the_config_is_a_usage_error_naming_the_file(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    pytester.makepyprojecttoml('[tool.mluverify]\ncore_versions = ["MLU290"]\n')
    result = run(pytester, "--mlu-target=mlu:cnnl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{pytester.path / 'pyproject.toml'}: [[]tool.mluverify[]] core_versions: "
                                 "*'MLU290'; valid: 'MLU270', 'MLU370'*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_an_unknown_core_version_option_is_a_usage_error_naming_the_option(pytester):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    result = run(pytester, "--mlu-target=mlu:cnnl", "--mlu-core-version=MLU290")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*command line option --mlu-core-version: *'MLU290'; valid: 'MLU270', 'MLU370'*"])


@pytest.mark.parametrize("option, named", [
    ("--mlu-regress-factor=-1", "--mlu-regress-factor: [[]tool.mluverify[]] regress_factor = -1 must be >= 1"),
    ("--mlu-noise-floor=-3", "--mlu-noise-floor: [[]tool.mluverify[]] noise_floor = -3 must be >= 0"),
    ("--mlu-determinism-share=2", "--mlu-determinism-share: *determinism_share = 2 must be between 0 and 1"),
])
def test_a_bad_mlu_option_is_a_usage_error_naming_the_option(pytester, option, named):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    result = run(pytester, "--mlu-target=cpu64:eager", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*command line option {named}*"])


@pytest.mark.parametrize("tolerances, named", [
    ('"add:float99" = 0.1', "key 'add:float99': unknown dtype 'float99'"),
    ('"add::nomode" = 0.1', "key 'add::nomode': no back end has mode 'nomode'"),
])
def test_a_bad_tolerance_key_names_the_file(pytester, tolerances, named):
    pytester.makepyfile(test_add=ADD_SUITE.format(count=1))
    pytester.makepyprojecttoml(f"[tool.mluverify.tolerances]\n{tolerances}\n")
    result = run(pytester, "--mlu-target=cpu64:eager")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{pytester.path / 'pyproject.toml'}: [[]tool.mluverify.tolerances[]] {named}*"])


HOST_READ_SUITE = """
import torch


class ScaledBySum(torch.nn.Module):
    def forward(self, x):
        return x * x.sum().item()  # a host read: no offline model holds it


def test_host_read(verify):
    verify(ScaledBySum(), torch.ones(3))
"""


def test_a_tool_error_shows_the_users_call_and_the_message_without_noise(pytester):
    pytester.makepyfile(test_host_read=HOST_READ_SUITE)
    result = run(pytester, "--mlu-target=mlu:offline", "--mlu-target=mlu:cnml")
    output = result.stdout.str()
    # the user's frame, then the tool's message; no frame inside mluverify
    result.stdout.fnmatch_lines([">       verify(ScaledBySum(), torch.ones(3))",
                                 "E       *OfflineModelError: *these ops do not fuse: aten::item*"])
    assert "mluverify/device/offline" not in output and "mluverify/core/pipeline.py" not in output
    # pytest captures every non-propagating logger: torch's structured trace stays out
    assert "torch.__trace" not in output


def test_verify_documents_every_argument(pytester):
    pytester.makepyfile(test_doc="""
import inspect


def test_doc(verify):
    named = [name for name in inspect.signature(verify).parameters if name not in ("args", "kwargs")]
    assert named and not [name for name in named if f"``{name}``" not in (verify.__doc__ or "")]
""")
    run(pytester, "--mlu-target=cpu64:eager").assert_outcomes(passed=1)
