"""Hypothesis strategies for programs and their inputs, valid by construction.

A program is drawn node by node: an op, its first operand among the values so far, a second
operand that fits (an existing value or a new input, at most ``MAX_INPUTS``), its parameters for
those shapes. The candidate node runs on meta tensors (torch's shape and dtype functions, no
data) and on zeros (the checks only a kernel makes); one that raises, or makes a value too
large, is redrawn (``NODE_TRIES`` times, then the whole program is rejected). Everything is
drawn by hypothesis, so a failing program shrinks to fewer, simpler ops and its inputs to
simpler values.

Inputs are drawn element by element in ``[-VALUE_RANGE, VALUE_RANGE]``, with the points where
ops are special among them: signed zeros always, infinities in half the cases. A program whose
CPU runs make any value NaN, or overflow in float32 where float64 does not, on those inputs is
rejected (hypothesis draws others: the bounded search for defined inputs), so a NaN or an
overflow is never reported as a finding; an infinity both runs agree on (``rsqrt(-0.0)`` is
-inf) is the defined answer, and the judge compares it exactly.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from hypothesis import assume, reject, strategies as st
from hypothesis.extra import numpy as hnp

from mluverify.fuzz.coverage import Steering, dtype_name
from mluverify.fuzz.ops import BOOL, FLOAT, INT, OPS, OpSpec
from mluverify.fuzz.program import Node, Program, run

MIN_OPS, MAX_OPS = 2, 16
MAX_INPUTS = 3
MAX_RANK, MAX_SIDE = 4, 6
MAX_NUMEL = 2048
NODE_TRIES = 4
# Each node beyond the minimum follows with odds MORE_ODDS : 1 (about 8 ops a program).
MORE_ODDS = 7
VALUE_RANGE = 3.0
# Decimal fractions that no binary float holds exactly: quotients of them land just beside an
# integer (1.0 // 0.1 is 9, floor(1.0 / 0.1) is 10), products and sums round at ties, equal
# values tie in argmax and sort. Drawn beside arbitrary floats.
# Held as the float32 nearest to each (what an array of that dtype keeps).
DECIMALS = tuple(float(np.float32(v)) for v in (0.1, 0.2, 0.3, 0.6, 0.7, 1.1, 2.3, -0.1, -0.3, -0.7, 0.5, 1.0))
# Where ops are defined but special (IEEE 754): a zero's sign decides 1 / x, rsqrt, sqrt, atan2
# and copysign (log of either zero is -inf); an infinity gives sigmoid, tanh, exp(-x), 1 / x,
# atan2 finite results. Drawn
# as often as one decimal each; infinities only in half the cases, since most programs make a
# NaN of them (inf - inf, 0 * inf) and are rejected.
SIGNED_ZEROS = (0.0, -0.0)
INFINITIES = (float("inf"), float("-inf"))


def _input_shape(min_rank: int = 1) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(1, MAX_SIDE), min_size=min_rank, max_size=MAX_RANK).map(tuple)


def _meta(shape: Sequence[int], dtype: Any = None) -> Any:
    import torch

    return torch.empty(tuple(shape), dtype=dtype or torch.float32, device="meta")


class _Draft:
    """The program drawn so far: input shapes, nodes, each value's meta tensor, the value whose
    storage it shares (``root``: itself unless a view or an in-place op made it) and whether an
    in-place op may write into it (``writable``): a node's own result or a view of one, never an
    input, never a view that overlaps itself (``expand``: one element seen at several places)
    and never what may or may not be its operand (``OpSpec.may_alias``)."""

    def __init__(self, first_input: tuple[int, ...]) -> None:
        self.inputs: list[tuple[int, ...]] = []
        self.nodes: list[Node] = []
        self.metas: dict[str, Any] = {}
        self.root: dict[str, str] = {}
        self.writable: dict[str, bool] = {}
        self.add_input(first_input)

    def add_input(self, shape: tuple[int, ...]) -> str:
        name = f"x{len(self.inputs)}"
        self.inputs.append(tuple(shape))
        self.metas[name], self.root[name], self.writable[name] = _meta(shape), name, False
        return name

    def add_node(self, node: Node, op: OpSpec, result: Any) -> None:
        name, first = f"v{len(self.nodes)}", node.args[0]
        self.nodes.append(node)
        self.metas[name] = result
        self.root[name] = self.root[first] if op.aliases else name
        if op.may_alias:
            self.writable[name] = False
        elif op.aliases:
            self.writable[name] = self.writable[first] and op.name != "expand"
        else:
            self.writable[name] = True

    def names(self) -> list[str]:
        """Value names, newest first (hypothesis shrinks towards the first: chains of ops)."""
        return list(reversed(self.metas))

    def program(self) -> Program:
        return Program(tuple(self.inputs), tuple(self.nodes))


def dtype_kind(dtype: Any) -> str:
    """``FLOAT``, ``INT`` or ``BOOL``: which ops accept a value of ``dtype``."""
    import torch

    if dtype == torch.bool:
        return BOOL
    return FLOAT if dtype.is_floating_point else INT


def _operand_candidates(draft: _Draft, op: OpSpec) -> list[str]:
    return [name for name in draft.names()
            if draft.metas[name].dim() >= op.min_rank and (draft.writable[name] or not op.inplace)
            and dtype_kind(draft.metas[name].dtype) in op.accepts]


def _casts_float_into_int(op: OpSpec, metas: list) -> bool:
    """An in-place op would write float values into an integer tensor (``copy_``): a float out
    of the integer range casts to an undefined value."""
    kinds = [dtype_kind(m.dtype) for m in metas]
    return op.inplace and len(kinds) == 2 and kinds[0] == INT and kinds[1] == FLOAT


def _try_node(draw, draft: _Draft, ops: Sequence[OpSpec], steering: Steering) -> bool:
    """Draw one node (op, operand and cast dtype steered by ``steering``); add it and return
    True when it type-checks on meta tensors."""
    operands = {op.name: _operand_candidates(draft, op) for op in ops}
    fitting = [op for op in ops if operands[op.name]]
    if not fitting:
        return False

    def operand_dtypes(names: Sequence[str]) -> list[str]:
        return [dtype_name(draft.metas[name].dtype) for name in names]

    op = draw(st.sampled_from(steering.weighted(
        fitting, [op.weight for op in fitting],
        [steering.op_count(op.name, operand_dtypes(operands[op.name])) for op in fitting])))
    candidates = operands[op.name]
    first = draw(st.sampled_from(steering.weighted(
        candidates, [1] * len(candidates), [steering.op_count(op.name, [d]) for d in operand_dtypes(candidates)])))
    chosen, new_input = [first], None
    if op.partner is not None:
        shape = tuple(draft.metas[first].shape)
        partners = [n for n in draft.names() if op.partner.fits(shape, tuple(draft.metas[n].shape))
                    and dtype_kind(draft.metas[n].dtype) in op.accepts
                    and not (op.inplace and draft.root[n] == draft.root[first])]
        room = len(draft.inputs) < MAX_INPUTS and FLOAT in op.accepts  # inputs are float32
        if room and (not partners or draw(st.booleans())):
            new_input = tuple(op.partner.new_shape(draw, shape))
            chosen.append(f"x{len(draft.inputs)}")
        elif partners:
            chosen.append(draw(st.sampled_from(partners)))
        else:
            return False
    metas = [draft.metas[n] if n in draft.metas else _meta(new_input) for n in chosen]
    if op.same_dtype and len({m.dtype for m in metas}) > 1 or _casts_float_into_int(op, metas):
        return False
    cast_dtypes = {"dtypes": steering.dtypes(op.casts_to)} if op.casts_to else {}
    params = op.params(draw, [tuple(m.shape) for m in metas], **cast_dtypes)
    node = Node(op.name, tuple(chosen), params)
    result = _check_on_meta(node, metas)
    if result is None:
        return False
    if new_input is not None:
        draft.add_input(new_input)
    draft.add_node(node, op, result)
    return True


def _check_on_meta(node: Node, metas: list) -> Any:
    """The node's result on meta tensors (clones: in-place ops must not change the drafts'),
    or None when torch rejects the arguments or the result is too large to draw. A node that
    passes runs once more on zeros of those shapes and dtypes on the CPU, for the checks only a
    kernel makes (a fill value outside an integer dtype's range: ``-1.5`` into uint8)."""
    import torch

    names = [f"m{i}" for i in range(len(metas))]
    source = Node(node.op, tuple(names), node.params).expression()
    try:
        result = eval(source, {"torch": torch}, {n: m.clone() for n, m in zip(names, metas)})  # noqa: S307
    except Exception:  # torch's own shape / dtype check said no: an invalid candidate
        return None
    if not isinstance(result, torch.Tensor):
        return None
    if result.dim() > MAX_RANK + 1 or result.numel() > MAX_NUMEL or result.numel() == 0:
        return None
    try:
        eval(source, {"torch": torch}, {n: torch.zeros(m.shape, dtype=m.dtype) for n, m in zip(names, metas)})  # noqa: S307
    except Exception:  # eager's kernel refuses it whatever the values: an invalid candidate
        return None
    return result


@st.composite
def programs(draw, ops: Sequence[OpSpec] = OPS, min_ops: int = MIN_OPS, max_ops: int = MAX_OPS,
             steering: Steering = Steering()) -> Program:
    """A valid program of ``min_ops..max_ops`` nodes drawn from ``ops`` (``steering``: towards
    the least judged ops and dtypes, ``mluverify.fuzz.coverage``)."""
    draft = _Draft(draw(_input_shape()))
    # A "one more?" flag before each node beyond the minimum (as ``st.lists`` draws): the
    # shrinker can then delete any node's draws, not only the last ones.
    for index in range(max_ops):
        if index >= min_ops and draw(st.integers(0, MORE_ODDS)) == 0:
            break
        if not any(_try_node(draw, draft, ops, steering) for _ in range(NODE_TRIES)):
            reject()
    return draft.program()


def input_values(program: Program) -> st.SearchStrategy[list]:
    """float32 tensors for the program's inputs, each element drawn (so values shrink): any
    float in range, one of ``DECIMALS`` or ``SIGNED_ZEROS``, or (in the second branch, which
    hypothesis shrinks away from) one of ``INFINITIES``."""
    import torch

    def arrays(specials: tuple[float, ...]) -> st.SearchStrategy[tuple]:
        elements = st.one_of(st.floats(-VALUE_RANGE, VALUE_RANGE, width=32, allow_subnormal=False),
                             st.sampled_from(DECIMALS + specials))
        return st.tuples(*[hnp.arrays(np.float32, shape, elements=elements, fill=st.nothing())
                           for shape in program.inputs])

    drawn = st.one_of(arrays(SIGNED_ZEROS), arrays(SIGNED_ZEROS + INFINITIES))
    return drawn.map(lambda arrays_drawn: [torch.from_numpy(a.copy()) for a in arrays_drawn])


def all_defined(program: Program, inputs: Sequence[Any]) -> bool:
    """No value of the program (each node's, not only the outputs) is NaN on the CPU, in float32
    or in float64, and both runs have the same infinities at the same places (an infinity only
    float32 has is an overflow, not a special point)."""
    import torch

    float32, float64 = (run(program, inputs, every_value=True, golden=golden) for golden in (False, True))
    for narrow, wide in zip(float32, float64):
        if not narrow.is_floating_point():
            continue
        if bool(narrow.isnan().any()) or bool(wide.isnan().any()):
            return False
        infinite = narrow.isinf()
        if not torch.equal(infinite, wide.isinf()) or not torch.equal(narrow[infinite], wide[infinite].to(narrow.dtype)):
            return False
    return True


@st.composite
def defined_cases(draw, ops: Sequence[OpSpec] = OPS, min_ops: int = MIN_OPS, max_ops: int = MAX_OPS,
                  steering: Steering = Steering()) -> tuple[Program, list]:
    """A program and inputs on which every value is defined on the CPU (``all_defined``)."""
    program = draw(programs(ops, min_ops, max_ops, steering))
    inputs = draw(input_values(program))
    assume(all_defined(program, inputs))
    return program, inputs


__all__ = ["INFINITIES", "MAX_INPUTS", "MAX_OPS", "MIN_OPS", "SIGNED_ZEROS", "all_defined", "defined_cases",
           "input_values", "programs"]
