"""Statuses through `pytest -p mluverify` (pytester subprocesses): a case whose op under test
ran on the CPU, a fused target that ran layer by layer, a nondeterministic device, the golden
reference in the records, and the settings that admit or skip those statuses."""
import fnmatch

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

# Back ends that tell the truth about how they ran: each mode shows one way a result can be
# right while the device did not compute it as claimed.
HONEST_BACKENDS = """
import torch
from mluverify import Backend, Execution, hookimpl

class Honest(Backend):
    name = "honest"
    modes = {"fallback": "cnnl", "unfused": "cnml", "noisy": "cnnl", "exact": "cnnl"}

    def execute(self, fn, args, kwargs, *, case):
        out = fn(*args, **kwargs)
        if case.mode == "fallback":   # the op ran on the CPU, reported as a fallback
            return Execution(out, ("aten::expand", "aten::maximum"))
        if case.mode == "unfused":    # a fused mode that could not capture the model
            return Execution(out, (), executed_as="layer-by-layer",
                             not_fused_reason="cannot capture M: data-dependent .item()")
        if case.mode == "noisy":      # a different rounding on every run
            return Execution(out + torch.randn(out.shape) * 1e-6)
        return Execution(out, executed_as="device", info={"device_impl": "honest", "core_number": 4})

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Honest())
"""

SUITE = """
import torch

def test_maximum(verify):
    verify(torch.maximum, torch.randn(64), torch.randn(64), op="maximum")
"""


def run(pytester, *args, pyproject=""):
    pytester.makeconftest(HONEST_BACKENDS)
    pytester.makepyfile(test_cases=SUITE)
    pytester.makefile(".toml", pyproject="[tool.mluverify]\n" + pyproject)
    return pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}", *args)


def records(pytester):
    return pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()


@pytest.mark.parametrize("mode, status, why", [
    ("fallback", "not_on_device", "the op under test ran on the CPU: aten::maximum"),
    ("unfused", "not_fused", "a fused target ran layer by layer: cannot capture M: data-dependent .item()"),
    ("noisy", "nondeterministic", "two runs on the device differ: output 0: * of 64 elements differ"),
])
def test_a_right_value_the_device_did_not_compute_as_claimed_is_no_pass(pytester, mode, status, why):
    result = run(pytester, f"--mlu-target=honest:{mode}", "--mlu-determinism-share=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{status}: {why}*"])
    record = records(pytester).iloc[0]
    assert record["status"] == status and bool(record["passed"])  # the value itself is right
    assert fnmatch.fnmatch(record["reason"], f"{why}*")
    assert bool(record["op_on_cpu"]) is (mode == "fallback")


def test_allow_admits_and_skip_reports_a_status(pytester):
    run(pytester, "--mlu-target=honest:unfused", pyproject='allow = ["not_fused"]').assert_outcomes(passed=1)
    assert records(pytester)["status"].tolist() == ["not_fused"]  # still counted apart
    run(pytester, "--mlu-target=honest:fallback", pyproject='skip = ["not_on_device"]').assert_outcomes(skipped=1)


def test_the_gate_fails_on_a_provenance_status_unless_allowed(pytester):
    result = run(pytester, "--mlu-target=honest:unfused", "--mlu-gate", pyproject='allow = ["not_fused"]')
    assert result.ret == 0
    result = run(pytester, "--mlu-target=honest:fallback", "--mlu-gate")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*mluverify gate: FAILED*", "*not_on_device*"])


def test_golden_reference_and_device_facts_reach_the_record(pytester):
    result = run(pytester, "--mlu-target=honest:exact", "--mlu-golden")
    result.assert_outcomes(passed=1)
    record = records(pytester).iloc[0]
    # maximum is exact in float32: both results equal float64's rounded to float32
    assert record["device_error"] == record["reference_error"] < 2**-24
    assert record["executed_as"] == "device" and record["device_impl"] == "honest"
    assert record["core_number"] == 4


def test_an_unknown_mode_in_a_tolerance_key_stops_the_run(pytester):
    result = run(pytester, "--mlu-target=honest:exact", pyproject='[tool.mluverify.tolerances]\n"softmax::cnnx" = 0.01')
    assert result.ret == 4  # usage error
    result.stderr.fnmatch_lines(["*'softmax::cnnx': no back end has mode 'cnnx'*"])


def test_an_op_without_a_device_kernel_is_not_on_device_on_the_emulated_mlu(pytester):
    pytester.makepyfile(test_erfcx="""
import torch

def test_erfcx(verify):
    verify(torch.special.erfcx, torch.rand(32), op="erfcx")
""")
    pytester.makefile(".toml", pyproject="[tool.mluverify]\n")
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnnl")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not_on_device: the op under test ran on the CPU: aten::special_erfcx*"])


def test_a_model_that_cannot_be_captured_is_not_fused_on_mlu_cnml(pytester):
    pytester.makepyfile(test_item="""
import torch

class Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:  # data-dependent control flow: no single graph
            return torch.relu(x)
        return -x

def test_gate(verify):
    verify(Gate(), torch.ones(8), op="gate")
""")
    pytester.makefile(".toml", pyproject="[tool.mluverify]\n")
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnml", "--mlu-core-version=MLU270")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not_fused: a fused target ran layer by layer*"])
    record = records(pytester).iloc[0]
    assert (record["status"], record["executed_as"], record["core_version"]) == \
        ("not_fused", "layer-by-layer", "MLU270")
    assert record["not_fused_reason"]
