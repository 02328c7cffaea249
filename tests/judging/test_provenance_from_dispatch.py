"""The op under test is what the case's callable dispatched on its CPU reference run, not what the
case is called (mluverify.core.provenance): a single-op case whose op fell back to the CPU is
``not_on_device`` under any name; a network keeps its fallbacks as provenance."""
import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest
import torch

from mluverify.core.case import Case, Target
from mluverify.core.gradients import GRAD, OUTPUT, ops_on_cpu
from mluverify.core.provenance import Dispatched, ops_under_test_on_cpu, run_recording

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

CNNL = Target("mlu", "cnnl")
# torch.special.bessel_j0 has no kernel on the emulated MLU: it runs as a CPU fallback there.
SUITE = """
import torch

def test_bessel(verify):
    verify(torch.special.bessel_j0, torch.randn(64), op="special_bessel_j0")

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.second(torch.special.bessel_j0(self.first(x)))

def test_net(verify):
    torch.manual_seed(0)
    verify(Net(), torch.randn(4, 8), op="bessel_net")
"""


def case(op="anything", aten_ops=()):
    return Case("t", op, CNNL, aten_ops=tuple(aten_ops))


def test_the_reference_run_records_what_computes_apart_from_plumbing():
    x = torch.randn(3, 4)
    _, single = run_recording(torch.special.bessel_j0, x.t())
    assert single.computing == {"aten::special_bessel_j0"}
    _, linear = run_recording(torch.nn.functional.linear, x, torch.randn(2, 4))
    assert linear.computing == {"aten::mm"} and "aten::t" in linear.plumbing  # a view
    _, network = run_recording(lambda v: torch.relu(v).sum(), x)
    assert network.computing == {"aten::relu", "aten::sum"}


@pytest.mark.parametrize("dispatched, fallbacks, under_test", [
    # a single-op case: any fallback but plumbing computed its op, whatever the names
    (Dispatched(frozenset({"aten::special_bessel_j0"})), ["aten::special_bessel_j0.out"],
     ("aten::special_bessel_j0.out",)),
    (Dispatched(frozenset({"aten::convolution"}), frozenset({"aten::expand"})),
     ["aten::expand", "aten::convolution_overrideable", "aten::copy_"], ("aten::convolution_overrideable",)),
    # a view the reference never dispatched is still plumbing
    (Dispatched(frozenset({"aten::maximum"})), ["aten::expand", "aten::maximum"], ("aten::maximum",)),
    # a network: fallbacks are provenance
    (Dispatched(frozenset({"aten::mm", "aten::relu"})), ["aten::relu"], ()),
    # a case of plumbing only tests its plumbing
    (Dispatched(frozenset(), frozenset({"aten::_to_copy"})), ["aten::_to_copy"], ("aten::_to_copy",)),
    (None, ["aten::relu"], ()),  # nothing known
])
def test_a_fallback_is_under_test_by_what_the_reference_dispatched(dispatched, fallbacks, under_test):
    assert ops_under_test_on_cpu(case(), fallbacks, dispatched) == under_test


def test_declared_aten_ops_win_over_the_reference_run():
    declared = case(aten_ops=("aten::round.decimals",))
    single = Dispatched(frozenset({"aten::round"}))
    assert ops_under_test_on_cpu(declared, ["aten::round.decimals", "aten::round"], single) == ("aten::round.decimals",)
    any_overload = case(aten_ops=("aten::addmv",))
    assert ops_under_test_on_cpu(any_overload, ["aten::addmv.out", "aten::add.Tensor"], None) == ("aten::addmv.out",)


def test_a_gradient_also_concerns_the_ops_of_the_backward():
    x = torch.randn(5, requires_grad=True)
    _, forward = run_recording(torch.sin, x)
    _, whole = run_recording(lambda v: torch.autograd.grad(torch.sin(v).sum(), v), x)
    dispatched = forward.with_backward(whole)
    assert "aten::cos" in dispatched.backward
    fallbacks = ("aten::cos", "aten::sin.out")
    assert ops_on_cpu(OUTPUT, case(), fallbacks, dispatched) == ("aten::sin.out",)  # cos is the backward's
    assert ops_on_cpu(GRAD, case(), fallbacks, dispatched) == fallbacks
    network = Dispatched(frozenset({"aten::mm", "aten::relu"})).with_backward(whole)
    assert ops_on_cpu(GRAD, case(), fallbacks, network) == ()


@pytest.mark.parametrize("target", ["mlu:cnnl", "mlu:cnml"])
def test_a_single_op_fallback_is_not_on_device_whatever_the_case_is_called(pytester, target):
    pytester.makepyfile(test_cases=SUITE)
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}",
                                           f"--mlu-target={target}", "-k", "bessel and not net")
    result.assert_outcomes(failed=1)
    record = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().iloc[0]
    assert record["status"] == "not_on_device" and bool(record["op_on_cpu"])
    assert "aten::special_bessel_j0" in record["fallback_ops"]
    result.stdout.fnmatch_lines(["*not_on_device: the op under test ran on the CPU: aten::special_bessel_j0*"])


def test_a_network_with_a_fallback_passes_with_the_fallback_as_provenance(pytester):
    pytester.makepyfile(test_cases=SUITE)
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnnl", "-k", "net")
    result.assert_outcomes(passed=1)
    record = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().iloc[0]
    assert record["status"] == "passed" and not bool(record["op_on_cpu"])
    assert "aten::special_bessel_j0" in record["fallback_ops"]
