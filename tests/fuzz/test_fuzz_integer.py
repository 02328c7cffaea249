"""Integer and bool values in fuzz programs: their ops' domains, exact judging, and in-place
writes through views that never reach an input or overlapping memory."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from mluverify.fuzz.differential import DEVIATION, PASS, REFERENCE, judge, torchfuzz_fails
from mluverify.fuzz.generate import _check_on_meta, _Draft, _operand_candidates, dtype_kind, programs
from mluverify.fuzz.ops import DIVISOR, INT_RANGES, spec
from mluverify.fuzz.program import Node, Program, run

TO_INT8 = {"dtype": "int8", "scale": 100.0, "lo": -128.0, "hi": 127.0}
# x0 * 100 cast to int8, then times 3 in int8: [100, -125, 50] * 3 = [300, -375, 150], which
# wrap modulo 256 to [44, -119, -106] (300 - 256, -375 + 256, 150 - 256).
WRAPPING = Program(((3,),), (Node("to_int", ("x0",), TO_INT8), Node("mul_int", ("v0",), {"k": 3})))
WRAPPING_INPUT = [torch.tensor([1.0, -1.25, 0.5])]
WRAPPED = torch.tensor([44, -119, -106], dtype=torch.int8)


def test_integer_ops_wrap_in_their_dtype_in_both_cpu_runs():
    """The float64 run keeps integer values integers: its result is the reference's, exactly."""
    for golden in (False, True):
        (out,) = run(WRAPPING, WRAPPING_INPUT, golden=golden)
        assert out.dtype == torch.int8 and torch.equal(out, WRAPPED)


def test_an_integer_result_one_off_in_one_element_deviates_and_torchfuzz_misses_it():
    off = WRAPPED.clone()
    off[0] += 1  # the sum moves by 1: within torchfuzz's 1.0 absolute
    judgement = judge(WRAPPING, WRAPPING_INPUT, "off:one", lambda p, x, t: (off,), "cnml")
    assert judgement.kind == DEVIATION and "1 / 3 elements differ" in judgement.reason
    assert not torchfuzz_fails((off,), (WRAPPED,))
    saturated = torch.tensor([127, -128, 127], dtype=torch.int8)  # a target that saturates
    assert judge(WRAPPING, WRAPPING_INPUT, "sat:x", lambda p, x, t: (saturated,), "cnml").kind == DEVIATION
    assert judge(WRAPPING, WRAPPING_INPUT, "same:x", lambda p, x, t: (WRAPPED.clone(),), "cnml").kind == PASS


def test_the_divisor_is_never_zero_or_minus_one():
    """Integer division by 0 raises and INT_MIN / -1 traps (SIGFPE): no int8 value as the second
    operand gives either, no uint8 value gives 0."""
    signed = eval(DIVISOR.format(b="b"), {"torch": torch}, {"b": torch.arange(-128, 128, dtype=torch.int8)})  # noqa: S307
    assert signed.dtype == torch.int8 and not set(signed.tolist()) & {0, -1}
    unsigned = eval(DIVISOR.format(b="b"), {"torch": torch}, {"b": torch.arange(0, 256).to(torch.uint8)})  # noqa: S307
    assert unsigned.dtype == torch.uint8 and 0 not in unsigned.tolist()


def test_float_to_int_casts_stay_inside_each_dtype():
    """Each clamp bound is a float32 inside its dtype, and the next float32 past it is outside."""
    for name, (low, high) in INT_RANGES.items():
        info = torch.iinfo(getattr(torch, name))
        assert float(np.float32(low)) == low == info.min
        assert float(np.float32(high)) == high <= info.max < float(np.nextafter(np.float32(high), np.float32(np.inf)))


def test_shifts_past_the_bit_width_are_in_the_registry():
    """torch defines them (0, or -1 for a negative value shifted right); C leaves them undefined."""
    program = Program(((2,),), (Node("to_int", ("x0",), {**TO_INT8, "dtype": "int16", "lo": -32768.0,
                                                          "hi": 32767.0}),
                                Node("shift_right", ("v0",), {"s": 16}), Node("shift_left", ("v0",), {"s": 16})))
    right, left = run(program, [torch.tensor([-0.05, 0.05])])
    assert right.tolist() == [-1, 0] and left.tolist() == [0, 0]


def _interpret(program: Program, inputs: list) -> dict:
    """Run the program node by node and report what each in-place op wrote into."""
    names = {f"x{i}": x for i, x in enumerate(inputs)}
    input_storages = {x.untyped_storage().data_ptr() for x in inputs}
    seen = {"kinds": set()}
    for index, node in enumerate(program.nodes):
        op = spec(node.op)
        if op.inplace:
            target = names[node.args[0]]
            assert target.untyped_storage().data_ptr() not in input_storages, f"{node.op} writes into an input"
            assert torch._debug_has_internal_overlap(target) == 0, f"{node.op} writes into overlapping memory"
            if len(node.args) == 2:
                kinds = (dtype_kind(target.dtype), dtype_kind(names[node.args[1]].dtype))
                assert kinds != ("int", "float"), f"{node.op} writes floats into integers"
        names[f"v{index}"] = eval(node.expression(), {"torch": torch}, names)  # noqa: S307
        seen["kinds"].add(dtype_kind(names[f"v{index}"].dtype))
    return seen


def test_in_place_ops_write_through_views_but_never_into_inputs_or_overlaps():
    seen = {"kinds": set()}

    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(program):
        inputs = [torch.linspace(-2, 2, int(np.prod(shape))).reshape(shape) for shape in program.inputs]
        found = _interpret(program, inputs)
        seen["kinds"] |= found["kinds"]

    check()
    assert seen["kinds"] == {"float", "int", "bool"}


def test_a_view_of_a_nodes_result_is_written_through_but_no_expand_cast_or_input_view():
    draft = _Draft((2, 1))
    for node in (Node("relu", ("x0",)), Node("transpose", ("v0",), {"dim0": 0, "dim1": 1}),
                 Node("expand", ("v0",), {"shape": [2, 3]}), Node("cast", ("v0",), {"dtype": "float32"}),
                 Node("flip", ("v3",), {"dim": 0}), Node("transpose", ("x0",), {"dim0": 0, "dim1": 1})):
        draft.add_node(node, spec(node.op), _check_on_meta(node, [draft.metas[a] for a in node.args]))
    # v1: a view of relu's result; v2 overlaps itself; v3 may be v0 itself (to its own dtype),
    # v4 is a fresh result again; v5 is a view of the input
    assert sorted(_operand_candidates(draft, spec("relu_"))) == ["v0", "v1", "v4"]


# The float32 sum of [1e8, 1, -1e8] loses the 1 (the CPU reference gives 0), the float64 run
# keeps it (1); each is then cast to int32: an integer made from a computed float.
CAST_SUM = Program(((3,),), (Node("sum_all", ("x0",)),
                             Node("to_int", ("v0",), {"dtype": "int32", "scale": 1.0, "lo": -2147483648.0,
                                                      "hi": 2147483520.0})))
CANCELLING = [torch.tensor([1e8, 1.0, -1e8])]


def test_integers_cast_from_computed_floats_get_the_golden_rule():
    """WRAPPING's integers are made of the input by integer ops: exact (the test above)."""
    (reference,), (golden,) = run(CAST_SUM, CANCELLING), run(CAST_SUM, CANCELLING, golden=True)
    assert reference.item() == 0 and golden.item() == 1 and golden.dtype == torch.int32
    exact = judge(CAST_SUM, CANCELLING, "exact:x", lambda p, x, t: (torch.tensor(1, dtype=torch.int32),), "cnml")
    assert exact.kind == REFERENCE and "integers made from computed floats judged as floats" in exact.reason
    # 4 away from the float64 run's 1, where the reference is 1 away: past k = 3 x its error
    far = judge(CAST_SUM, CANCELLING, "far:x", lambda p, x, t: (torch.tensor(5, dtype=torch.int32),), "cnml")
    assert far.kind == DEVIATION


# A product on the device rounds otherwise than the CPU's (within cnnl's 0.3 %), times 10 and cast
# to int8: one of the 180 integers lands one unit beside the CPU's (seed 3, found by search).
LINEAR_TO_INT8 = Program(((12, 5), (15, 5)), (Node("linear", ("x0", "x1")),
                                              Node("to_int", ("v0",), {**TO_INT8, "scale": 10.0})))


def _linear_inputs(seed: int = 3) -> list:
    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(12, 5, generator=generator) * 6 - 3, torch.rand(15, 5, generator=generator) * 6 - 3]


def test_an_integer_cast_one_unit_beside_the_cpus_passes_on_the_clean_device():
    pytest.importorskip("mluverify.device")
    from mluverify.cli.fuzz import TargetRunner

    runner, inputs = TargetRunner(), _linear_inputs()
    (device,), (cpu,) = runner(LINEAR_TO_INT8, inputs, "mlu:cnnl"), run(LINEAR_TO_INT8, inputs)
    assert int((device != cpu).sum()) == 1 and int((device.int() - cpu.int()).abs().max()) == 1
    judgement = judge(LINEAR_TO_INT8, inputs, "mlu:cnnl", runner, "cnnl")
    assert judgement.kind == PASS, judgement.reason


def test_an_integer_cast_that_wraps_instead_of_clamping_still_deviates():
    inputs = _linear_inputs()
    (cpu,) = run(LINEAR_TO_INT8, inputs)
    wrapped = cpu.clone()
    top = int(cpu.abs().argmax())
    wrapped.view(-1)[top] = -cpu.view(-1)[top] - 1  # 127 read back as -128: a wrapping cast
    judgement = judge(LINEAR_TO_INT8, inputs, "wrap:x", lambda p, x, t: (wrapped,), "cnnl")
    assert judgement.kind == DEVIATION, judgement.reason
