"""How a case ends (mluverify.core.status) and which ATen ops are its op under test
(mluverify.core.provenance, declared ops): pure decisions, checked against hand-written tables."""
import pytest

from mluverify.core.case import Case, Target
from mluverify.core.provenance import is_declared, ops_under_test_on_cpu
from mluverify.core.status import Facts, decide

CNNL = Target("mlu", "cnnl")


def case(op, aten_ops=()):
    return Case("t", op, CNNL, aten_ops=tuple(aten_ops))


@pytest.mark.parametrize("facts, status", [
    (Facts(True), "passed"),
    (Facts(False), "failed"),
    (Facts(True, error="RuntimeError: x"), "errored"),
    (Facts(True, ops_on_cpu=("aten::clamp.Tensor",)), "not_on_device"),
    (Facts(True, not_fused_reason="cannot capture M: .item()"), "not_fused"),
    (Facts(True, nondeterminism="output 0: 3 of 8 elements differ"), "nondeterministic"),
    # the most severe wins: a CPU fallback of the op under test hides nothing about fusion
    (Facts(False, ops_on_cpu=("aten::maximum",), not_fused_reason="x"), "not_on_device"),
    (Facts(False, not_fused_reason="", nondeterminism="y"), "not_fused"),
])
def test_the_most_severe_status_applies(facts, status):
    assert decide(facts)[0] == status


def test_the_why_names_what_happened():
    assert decide(Facts(True, ops_on_cpu=("aten::maximum", "aten::minimum")))[1] == \
        "the op under test ran on the CPU: aten::maximum, aten::minimum"
    assert decide(Facts(True, not_fused_reason="cannot capture"))[1] == \
        "a fused target ran layer by layer: cannot capture"
    assert decide(Facts(True)) == ("passed", "")


def test_declared_aten_ops_are_the_op_under_test():
    declared = case("round_decimals", aten_ops=("aten::round.decimals",))
    assert is_declared(declared, "aten::round.decimals")
    assert not is_declared(declared, "aten::round")
    any_overload = case("my_matvec", aten_ops=("aten::addmv",))
    assert is_declared(any_overload, "aten::addmv.out") and is_declared(any_overload, "aten::addmv")
    clamp = case("clamp", aten_ops=("aten::clamp",))
    assert ops_under_test_on_cpu(clamp, ["aten::expand", "aten::clamp.Tensor", "aten::copy_"], None) == \
        ("aten::clamp.Tensor",)


def test_a_failed_comparison_records_its_worst_elements():
    import numpy as np

    from mluverify.core.backends import Execution
    from mluverify.judge import compare
    from mluverify.core.record import make_record

    expected = np.ones(4, dtype=np.float32)
    actual = expected.copy()
    actual[2] = 1.5  # rel_mse 0.25 > 0.003
    verdict = compare(actual, expected)
    record = make_record("r", case("add"), verdict, Execution(actual), 0.0, status="failed")
    assert record.worst.startswith("(2,): 1.5 vs 1; ")
    assert make_record("r", case("add"), compare(expected, expected), Execution(expected), 0.0,
                       status="passed").worst == ""
