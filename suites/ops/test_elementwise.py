"""Element-wise ops of the device's kernel set: unary, binary with broadcasting, with scalars.

Inputs come from ``mluverify.strategies``: shapes with size-1 and odd dims, maybe
non-contiguous, values from every distribution, restricted to each op's domain; ops that define
results at +-inf / NaN also get non-finite inputs. float16 cases draw values float16 holds, so
the float32 CPU reference sees the same inputs; ``half_limit`` keeps results inside float16.

Each op also gets one case at its special points (``strategies.special_points``: signed zeros,
+-1, the dtype's smallest subnormal, smallest normal and largest value, the infinities; every
pair of them for a binary op), wherever it is defined: rsqrt(-0.0) = -inf, x / -0.0, exp(-inf) = 0,
tanh(+-inf) = +-1. The drawn cases keep away from these (their domains keep results accurate).
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import hypothesis
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from mluverify.strategies import (
    DISTRIBUTIONS,
    NONFINITE,
    broadcastable_shapes,
    search_score,
    shapes,
    special_points,
    tensors,
)


class Unary(NamedTuple):
    name: str
    fn: Callable
    low: float | None = None
    high: float | None = None
    half_limit: float | None = None  # |input| bound for float16, so the result fits
    nonfinite: bool = False  # the op defines its result at +-inf and NaN


UNARY = (
    Unary("relu", torch.relu, nonfinite=True),
    Unary("relu6", F.relu6, nonfinite=True),
    Unary("leaky_relu", functools.partial(F.leaky_relu, negative_slope=0.1), nonfinite=True),
    Unary("hardtanh", functools.partial(F.hardtanh, min_val=-2.0, max_val=3.0), nonfinite=True),
    Unary("sigmoid", torch.sigmoid, nonfinite=True),
    Unary("tanh", torch.tanh, nonfinite=True),
    Unary("gelu", F.gelu),
    Unary("gelu_tanh", functools.partial(F.gelu, approximate="tanh")),
    Unary("silu", F.silu),
    Unary("elu", F.elu),
    Unary("exp", torch.exp, high=80.0, half_limit=10.0, nonfinite=True),
    Unary("log", torch.log, low=1e-3),
    Unary("sqrt", torch.sqrt, low=0.0),
    Unary("rsqrt", torch.rsqrt, low=1e-3),
    Unary("abs", torch.abs, nonfinite=True),
    Unary("neg", torch.neg, nonfinite=True),
    Unary("clamp", functools.partial(torch.clamp, min=-0.5, max=0.75), nonfinite=True),
    Unary("clamp_min", functools.partial(torch.clamp_min, min=0.25)),
    Unary("clamp_max", functools.partial(torch.clamp_max, max=0.25)),
    Unary("pow_scalar", functools.partial(torch.pow, exponent=2.0), half_limit=200.0),
    Unary("pow_cube", functools.partial(torch.pow, exponent=3), half_limit=30.0),
    Unary("pow_fractional", functools.partial(torch.pow, exponent=0.5), low=0.0),
    Unary("ceil", torch.ceil),
    Unary("floor", torch.floor),
    Unary("round", torch.round),
    Unary("sign", torch.sign, nonfinite=True),
    Unary("isnan", torch.isnan, nonfinite=True),
    Unary("dropout_eval", functools.partial(F.dropout, p=0.5, training=False)),
    Unary("hardswish", F.hardswish),
    Unary("hardsigmoid", F.hardsigmoid),
    Unary("sin", torch.sin, low=-100.0, high=100.0),
    Unary("cos", torch.cos, low=-100.0, high=100.0),
    Unary("reciprocal", torch.reciprocal, low=1e-3),
)


class Binary(NamedTuple):
    name: str
    fn: Callable
    other_low: float | None = None  # the second operand's domain (e.g. away from 0 for div)
    half_limit: float | None = None
    low: float | None = None  # the first operand's domain (pow: a negative base to a fractional power is NaN)


BINARY = (
    Binary("add", torch.add),
    Binary("add_alpha", functools.partial(torch.add, alpha=0.5)),
    Binary("sub", torch.sub),
    Binary("sub_alpha", functools.partial(torch.sub, alpha=2.0), half_limit=1e4),
    Binary("mul", torch.mul, half_limit=200.0),
    Binary("div", torch.div, other_low=0.5),
    Binary("div_floor", functools.partial(torch.div, rounding_mode="floor"), other_low=0.5),
    Binary("pow", torch.pow, other_low=0.0, half_limit=3.0, low=0.0),
    Binary("maximum_where", lambda x, y: torch.where(x > y, x, y)),
    Binary("eq", torch.eq),
    Binary("ne", torch.ne),
    Binary("gt", torch.gt),
    Binary("lt", torch.lt),
    Binary("ge", torch.ge),
    Binary("le", torch.le),
)

SCALAR = (
    ("add_scalar", lambda x: x + 1.5),
    ("sub_scalar", lambda x: x - 0.25),
    ("rsub_scalar", lambda x: 2.0 - x),
    ("mul_scalar", lambda x: x * 3.0),
    ("div_scalar", lambda x: x / 7.0),
    ("eq_scalar", lambda x: x == 1.0),
    ("gt_scalar", lambda x: x > 0.0),
    ("add_inplace", lambda x: x.clone().add_(2.0)),
    ("mul_inplace", lambda x: x.clone().mul_(0.5)),
    ("relu_inplace", lambda x: F.relu(x.clone(), inplace=True)),
)


def _domain(low: float | None, high: float | None, dtype: str, half_limit: float | None):
    """The input domain in ``dtype``: the op's, narrowed to ``+-half_limit`` in float16."""
    if dtype != "float16" or half_limit is None:
        return low, high
    return max(low if low is not None else -half_limit, -half_limit), min(high if high is not None else half_limit, half_limit)


def _label(op: str, dtype: str) -> str:
    return f"raw_rel_mse:{op}:{dtype}"


@pytest.mark.parametrize("op", UNARY, ids=[op.name for op in UNARY])
@given(data=st.data())
def test_unary(verify, op: Unary, dtype: str, data) -> None:
    low, high = _domain(op.low, op.high, dtype, op.half_limit)
    distributions = (*DISTRIBUTIONS, NONFINITE) if op.nonfinite else DISTRIBUTIONS
    x = data.draw(tensors(shapes(), distributions=distributions, low=low, high=high, grid=dtype), label="x")
    verdict = verify(op.fn, x, op=op.name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=_label(op.name, dtype))


@pytest.mark.parametrize("op", BINARY, ids=[op.name for op in BINARY])
@given(data=st.data())
def test_binary_broadcast(verify, op: Binary, dtype: str, data) -> None:
    shape = data.draw(shapes(), label="shape")
    other_shape = data.draw(broadcastable_shapes(shape), label="other_shape")
    if data.draw(st.booleans(), label="swap"):  # broadcasting from either side
        shape, other_shape = other_shape, shape
    low, high = _domain(op.low, None, dtype, op.half_limit)
    x = data.draw(tensors(shape, low=low, high=high, grid=dtype), label="x")
    other_low, other_high = _domain(op.other_low, None, dtype, op.half_limit)
    y = data.draw(tensors(other_shape, low=other_low, high=other_high, grid=dtype), label="y")
    verdict = verify(op.fn, x, y, op=op.name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=_label(op.name, dtype))


@pytest.mark.parametrize("name, fn", SCALAR, ids=[name for name, _ in SCALAR])
@given(data=st.data())
def test_with_scalar(verify, name: str, fn: Callable, dtype: str, data) -> None:
    x = data.draw(tensors(shapes(), low=-1e4, high=1e4, grid=dtype), label="x")
    verdict = verify(fn, x, op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=_label(name, dtype))


@given(data=st.data())
def test_glu(verify, dtype: str, data) -> None:
    # the gated dim has an even size: its halves are the value and the gate
    shape = data.draw(shapes().map(lambda s: (*s[:-1], 2 * s[-1])), label="shape")
    x = data.draw(tensors(shape, grid=dtype), label="x")
    verdict = verify(lambda t: F.glu(t, -1), x, op="glu", dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=_label("glu", dtype))


# op name, callable, arity, half_limit: every op of the tables above
SPECIAL_CASES = (*((op.name, op.fn, 1, op.half_limit) for op in UNARY),
                 *((op.name, op.fn, 2, op.half_limit) for op in BINARY),
                 *((name, fn, 1, None) for name, fn in SCALAR))


def _special_inputs(fn: Callable, arity: int, dtype: str, half_limit: float | None) -> tuple[torch.Tensor, ...]:
    """Each special point of ``dtype`` (each pair of them for ``arity`` 2) where ``fn`` is
    defined (its CPU result is not NaN: log(-1) is left out, log(-0.0) = -inf kept) and the
    CPU's float32 result is finite exactly where the float64 result in ``dtype`` is: an overflow
    of one precision only (gelu's float32 formula at float32's largest value, x + x at float16's)
    says nothing of the device. In float16 finite points stay within ``half_limit``, as in the
    drawn cases (the op may overflow float16 inside, as x - 2y does)."""
    points = torch.from_numpy(special_points(dtype))
    if dtype == "float16" and half_limit is not None:
        points = points[~points.isfinite() | (points.abs() <= half_limit)]
    operands = tuple(torch.cartesian_prod(points, points).T) if arity == 2 else (points,)
    result = fn(*operands)
    if not result.is_floating_point():
        return operands
    exact = fn(*(operand.double() for operand in operands)).to(getattr(torch, dtype))
    defined = ~result.isnan() & (result.isfinite() == exact.isfinite())
    return tuple(operand[defined] for operand in operands)


@pytest.mark.parametrize("name, fn, arity, half_limit", SPECIAL_CASES, ids=[case[0] for case in SPECIAL_CASES])
def test_special_points(verify, name: str, fn: Callable, arity: int, half_limit: float | None, dtype: str) -> None:
    # an output that is all infinities (both sides, same signs) is the right answer here
    verify(fn, *_special_inputs(fn, arity, dtype, half_limit), op=name, dtype=dtype, expect_non_finite=True)


class Integer(NamedTuple):
    name: str
    fn: Callable
    dtypes: tuple[str, ...]  # the integer dtypes the zoo's models run it in (suites/zoo/op_coverage.md)
    arity: int = 1
    other_low: int = -1000  # the second operand's least value (floor_divide: positive divisors)


INTEGER = (  # the index arithmetic of position ids and attention masks (Hugging Face models)
    Integer("add", torch.add, ("int32", "int64"), 2),
    Integer("sub", torch.sub, ("int64",), 2),
    Integer("rsub", lambda x: 1 - x, ("int64",)),
    Integer("mul", torch.mul, ("int32", "int64"), 2),
    Integer("neg", torch.neg, ("int64",)),
    Integer("abs", torch.abs, ("int64",)),
    Integer("minimum", torch.minimum, ("int64",), 2),
    Integer("lt", torch.lt, ("int64",), 2),
    Integer("le", torch.le, ("int64",), 2),
    Integer("ge", torch.ge, ("int64",), 2),
    Integer("gt", torch.gt, ("int64",), 2),
    Integer("ne", torch.ne, ("int64",), 2),
    Integer("floor_divide", torch.floor_divide, ("int64",), 2, other_low=1),
    Integer("cumsum", lambda x: torch.cumsum(x, -1), ("int32", "int64")),
    Integer("sort", lambda x: torch.sort(x, dim=-1, stable=True), ("int64",)),
    Integer("repeat", lambda x: x.repeat(2, *([1] * (x.dim() - 1))), ("int64",)),
    Integer("to_copy", lambda x: x.to(torch.float32), ("int32", "int64")),  # ids to float (masks, biases)
    # token type ids read through position ids (BERT's buffered token_type_ids); indices from the values
    Integer("gather", lambda x: torch.gather(x, -1, x.abs() % x.shape[-1]), ("int64",)),
)
INTEGER_CASES = [pytest.param(op, dtype, id=f"{op.name}-{dtype}") for op in INTEGER for dtype in op.dtypes]


def _integers(data, shape, dtype: str, low: int = -1000, label: str = "x") -> torch.Tensor:
    """Integers in [low, 1000] of ``dtype``: ``tensors``' values (every distribution, maybe a
    strided view) rounded, so they probe at 0, +-1 and the tensors' other kernel branch points."""
    return data.draw(tensors(shape, low=low, high=1000.0), label=label).round().to(getattr(torch, dtype))


@pytest.mark.parametrize("op, int_dtype", INTEGER_CASES)
@given(data=st.data())
def test_integer(verify, op: Integer, int_dtype: str, data) -> None:
    shape = data.draw(shapes(), label="shape")
    operands = [_integers(data, shape, int_dtype)]
    if op.arity == 2:
        other_shape = data.draw(broadcastable_shapes(shape), label="other_shape")
        operands.append(_integers(data, other_shape, int_dtype, op.other_low, label="y"))
    verify(op.fn, *operands, op=op.name, dtype=int_dtype)  # judged exactly: integer results


@given(data=st.data())
def test_cast_to_integer(verify, dtype: str, data) -> None:
    """float to int64, rounding towards zero (MPNet's and T5's relative position buckets)."""
    x = data.draw(tensors(shapes(), low=-1000.0, high=1000.0, grid=dtype), label="x")
    verify(lambda t: t.to(torch.int64), x, op="to_copy", dtype=dtype)  # judged exactly: integer results


BOOLEAN = (  # the attention masks' logic
    ("bitwise_and", torch.bitwise_and, 2),
    ("bitwise_not", torch.bitwise_not, 1),
    ("all", torch.all, 1),
    ("where", torch.where, 3),
    ("index", lambda x, mask: x[mask], 2),
    ("to_copy", lambda x: x.to(torch.int64), 1),
)


@pytest.mark.parametrize("name, fn, arity", BOOLEAN, ids=[name for name, *_ in BOOLEAN])
@given(data=st.data())
def test_boolean(verify, name: str, fn: Callable, arity: int, data) -> None:
    shape = data.draw(shapes(), label="shape")
    operands = [data.draw(tensors(shape), label=f"operand{i}") > 0 for i in range(arity)]
    verify(fn, *operands, op=name, dtype="bool")  # judged exactly: boolean results
