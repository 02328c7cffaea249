"""The differential oracle: the golden run blames the target or the reference; torchfuzz's sum
oracle beside it."""
import torch

from mluverify.fuzz.differential import DEVIATION, ERROR, PASS, REFERENCE, judge, torchfuzz_fails
from mluverify.fuzz.program import Node, Program, run

SUM = Program(((3,),), (Node("relu", ("x0",)), Node("sum_all", ("x0",))))
# float32 loses the 1 in 1e8 + 1 - 1e8: the CPU reference is 0, the exact sum is 1
CANCELLING = [torch.tensor([1e8, 1.0, -1e8])]


def _exact(program, inputs, target):
    """A target that computes in float64 and rounds once: closer to the truth than the CPU."""
    return tuple(v.float() for v in run(program, inputs, golden=True))


def test_a_target_closer_to_float64_than_the_reference_is_the_references_fault():
    assert run(SUM, CANCELLING)[1].item() != 1.0  # the reference's own error, as claimed
    judgement = judge(SUM, CANCELLING, "exact:float64", _exact, "cnnl")
    assert judgement.kind == REFERENCE
    assert judgement.device_error == 0.0 and judgement.reference_error == 1.0


def test_a_target_off_where_the_reference_is_right_deviates():
    def off_by_one_element(program, inputs, target):
        relu, total = run(program, inputs)
        return relu, total + 1.0

    inputs = [torch.tensor([1.0, 2.0, 3.0])]
    judgement = judge(SUM, inputs, "off:one", off_by_one_element, "cnml")
    assert judgement.kind == DEVIATION and judgement.device_error == 1 / 6


def test_a_target_that_raises_is_an_error_finding():
    def broken(program, inputs, target):
        raise RuntimeError("no kernel for aten::sum\nsecond line")

    judgement = judge(SUM, [torch.ones(3)], "broken:x", broken, "cnnl")
    assert judgement.kind == ERROR and judgement.reason == "RuntimeError: no kernel for aten::sum"


def test_an_exact_target_passes():
    assert judge(SUM, [torch.ones(3)], "same:cpu", lambda p, x, t: run(p, x), "cnnl").kind == PASS


def test_torchfuzz_misses_per_element_errors_that_keep_the_sum():
    expected = torch.tensor([1.0, 2.0, 3.0, 4.0])
    swapped = torch.tensor([4.0, 3.0, 2.0, 1.0])  # every element wrong, same sum
    assert not torchfuzz_fails((swapped,), (expected,))
    assert judge(Program(((4,),), (Node("relu", ("x0",)), Node("neg", ("v0",)))), [expected],
                 "flip:x", lambda p, x, t: (-swapped,), "cnml").kind == DEVIATION


def test_torchfuzz_needs_both_5_percent_and_1_absolute():
    assert torchfuzz_fails((torch.tensor([10.0, 2.0]),), (torch.tensor([10.0, 0.5]),))  # 1.5 abs, 14 %
    assert not torchfuzz_fails((torch.tensor([0.2]),), (torch.tensor([0.1]),))  # 100 % but 0.1 abs
    assert not torchfuzz_fails((torch.tensor([102.0]),), (torch.tensor([100.0]),))  # 2 abs but 2 %
