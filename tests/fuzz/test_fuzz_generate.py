"""Generation is valid by construction: every drawn program runs on the CPU as drawn."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from mluverify.errors import InvalidArgument
from mluverify.fuzz.generate import DECIMALS, MAX_INPUTS, MAX_OPS, defined_cases
from mluverify.fuzz.ops import FAMILIES, OPS, op_set
from mluverify.fuzz.program import Node, Program, run


@settings(max_examples=150, deadline=None, database=None, derandomize=False,
          suppress_health_check=list(HealthCheck))
@given(defined_cases())
def test_every_drawn_program_runs_as_drawn(case):
    """No candidate that passed the meta check fails at run time, in float32 or float64, and
    no output is NaN (undefined programs are filtered, never reported); where one run has an
    infinity the other has the same."""
    program, inputs = case
    assert 1 <= len(program.inputs) <= MAX_INPUTS and 2 <= len(program.nodes) <= MAX_OPS
    narrow, wide = (run(program, inputs, golden=golden) for golden in (False, True))
    assert len(narrow) == len(wide) == len(program.outputs)
    for a, b in zip(narrow, wide):
        assert not (a.isnan().any() or b.isnan().any())
        assert torch.equal(a.isinf(), b.isinf()) and torch.equal(a[a.isinf()], b[b.isinf()].to(a.dtype))
    assert [tuple(x.shape) for x in inputs] == list(program.inputs)


def test_every_family_has_ops_and_every_op_a_family():
    assert {op.family for op in OPS} == set(FAMILIES)


def test_an_unknown_op_is_named():
    with pytest.raises(InvalidArgument, match="unknown fuzz op or op family 'matmull'"):
        op_set(["matmul", "matmull"])


def test_a_family_selects_its_ops_and_an_op_name_wins_over_a_family():
    assert {op.name for op in op_set(["norm"])} == {"layer_norm", "rms_norm", "group_norm"}
    assert {op.name for op in op_set(["softmax"])} == {"softmax"}


def test_in_place_ops_leave_the_callers_inputs_alone():
    program = Program(((2, 3),), (Node("relu", ("x0",)), Node("mul_", ("v0",), {"s": 2.0})))
    x = torch.tensor([[-1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
    before = x.clone()
    (out,) = run(program, [x])
    assert torch.equal(x, before)
    assert torch.equal(out, torch.relu(before) * 2)


def test_decimal_inputs_put_quotients_beside_an_integer():
    """Drawn beside arbitrary floats: float32(1.0) / float32(0.1) is 9.99999985 exactly, which
    floor division keeps at 9 while the rounded quotient is 10.0."""
    one, tenth = (torch.tensor([v], dtype=torch.float32) for v in (1.0, 0.1))
    assert {1.0, float(tenth)} <= set(DECIMALS)
    assert torch.floor_divide(one, tenth).item() == 9.0 and torch.floor(one / tenth).item() == 10.0


def test_the_float64_run_makes_floats_from_integers_in_float64():
    """``clamp`` of integer indices with float bounds takes the default dtype: in the golden run
    that is float64, so it meets a float64 input in ``linear`` (a drawn program failed there:
    "expected m1 and m2 to have the same dtype, but got: float != double")."""
    program = Program(inputs=((4, 3), (2, 3)), nodes=(
        Node("sort_indices", ("x0",), {"dim": 1}), Node("clamp", ("v0",), {"lo": 0.0, "hi": 1.0}),
        Node("linear", ("v1", "x1"))))
    inputs = (torch.randn(4, 3), torch.randn(2, 3))
    narrow, wide = run(program, inputs)[0], run(program, inputs, golden=True)[0]
    assert (narrow.dtype, wide.dtype) == (torch.float32, torch.float64)
    assert torch.allclose(narrow.double(), wide, atol=1e-6)
    assert torch.get_default_dtype() == torch.float32  # restored after the golden run


@settings(max_examples=60, deadline=None, database=None, derandomize=False,
          suppress_health_check=list(HealthCheck))
@given(defined_cases(op_set(["to_int", "index_fill_", "masked_fill", "masked_fill_"])))
def test_a_fill_value_outside_an_integer_dtype_is_never_drawn(case):
    """Eager refuses to fill a uint8 tensor with -1.5 (``value cannot be converted to type
    uint8_t without overflow``), a check meta tensors do not make: such a node is redrawn, so the
    campaign's eager runs never raise (the seventh campaign lost a shard's summary to one)."""
    program, inputs = case
    for golden in (False, True):
        run(program, inputs, golden=golden)
