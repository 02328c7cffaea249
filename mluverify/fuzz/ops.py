"""The fuzzer's op registry: what a program may contain and how each op's arguments are drawn.

Each op is one Python expression over torch (``template``): ``{a}`` / ``{b}`` are its tensor
operands, the other fields its parameters (JSON values drawn for the operands' shapes). The same
expression builds the program's callable, runs on meta tensors to check a candidate, and is
written into the standalone reproducer, so an op is defined in one place.

Domains are restricted in the expression itself only where an op is undefined: ``log``,
``sqrt`` and ``rsqrt`` of a negative value are NaN, so they read ``MAGNITUDE`` (a negative
value's negation, -0.0 kept). Points where an op is defined but special stay in: signed zeros
(``rsqrt(-0.0)`` and ``1 / -0.0`` are -inf, ``log(-0.0)`` is -inf, ``sqrt(-0.0)`` is -0.0,
``atan2(0, -0.0)`` is pi, ``copysign(x, -0.0)`` is -|x|) and infinities (``sigmoid(-inf)``,
``1 / inf``, ``exp(-inf)`` are finite). What is NaN anyway (``0 / 0``, ``inf - inf``) or
overflows in float32 alone is filtered out when the program is drawn (``generate``).

Version 1 of the program format restricted more (``log(|a| + 0.5)``, ``a / (|b| + 0.5)``); its
programs read those ops as the ``LEGACY_V1`` ops, which are never drawn.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from hypothesis import strategies as st

from mluverify.errors import valid_choice

FAMILIES = ("pointwise", "binary", "reduction", "matmul", "norm", "softmax", "view", "concat", "index",
            "cast", "inplace", "integer")
CAST_DTYPES = ("float16", "bfloat16", "float64", "float32")
SCALARS = (2.0, 0.5, -1.5, 3.0)
# Integer scalars for integer ops: they keep an integer operand's dtype, so products wrap.
INT_SCALARS = (3, -1, -7, 127, 1000, 65537)
# Shift amounts, past the bit width included (torch defines those: 0, or -1 for a negative
# operand shifted right; a C shift by as much is undefined, a compiler's trap).
SHIFTS = (1, 3, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64)
# Float-to-integer casts: each dtype's range, as float32 values inside it (2**31 - 1 is not a
# float32; a float out of the range casts to an undefined value in C and in torch's docs).
INT_RANGES = {"int8": (-128.0, 127.0), "uint8": (0.0, 255.0), "int16": (-32768.0, 32767.0),
              "int32": (-2147483648.0, 2147483520.0), "int64": (-9223372036854775808.0, 9223371487098961920.0)}
INT_SCALES = (1.0, 10.0, 1000.0, 1e6, 1e12, 1e20)
# Operand dtype kinds an op accepts.
FLOAT, INT, BOOL = "float", "int", "bool"
NUMBER, INTEGRAL, ANY = (FLOAT, INT), (INT, BOOL), (FLOAT, INT, BOOL)
# The magnitude of a value with its zero's sign kept: -0.0 < 0 is false, so -0.0 stays -0.0
# (``abs`` would make it +0.0, and ``rsqrt`` would never see -0.0).
MAGNITUDE = "torch.where({a} < 0, -{a}, {a})"
# A divisor that is never 0 and never -1 (INT_MIN / -1 traps on x86: eager dies of SIGFPE),
# negative ones included; for floats its magnitude is > 0.
DIVISOR = "torch.where({b} > 0, {b}, {b} - 2)"

Draw = Callable[[st.SearchStrategy], Any]
Shape = tuple[int, ...]


def _no_params(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {}


def _dim(draw: Draw, shape: Shape) -> int:
    return draw(st.integers(0, max(len(shape) - 1, 0)))


def _reduce_params(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"dim": _dim(draw, shapes[0]), "keepdim": draw(st.booleans())}


def _dim_param(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"dim": _dim(draw, shapes[0])}


def _scalar(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"s": draw(st.sampled_from(SCALARS))}


def _clamp(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    low = draw(st.sampled_from((-1.0, -0.5, 0.0)))
    return {"lo": low, "hi": low + draw(st.sampled_from((1.0, 2.0)))}


def _transpose(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    rank = len(shapes[0])
    first = draw(st.integers(0, max(rank - 2, 0)))
    return {"dim0": first, "dim1": draw(st.integers(first + 1, max(rank - 1, first + 1)))}


def _permute(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"perm": list(draw(st.permutations(range(len(shapes[0])))))}


def _reshape(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    """Flatten everything, merge two neighbouring dims, or split one dim into two factors."""
    shape = list(shapes[0])
    how = draw(st.sampled_from(("flat", "merge", "split")))
    if how == "merge" and len(shape) >= 2:
        at = draw(st.integers(0, len(shape) - 2))
        return {"shape": shape[:at] + [shape[at] * shape[at + 1]] + shape[at + 2:]}
    if how == "split" and shape:
        at = _dim(draw, tuple(shape))
        factors = [f for f in range(1, shape[at] + 1) if shape[at] % f == 0]
        factor = draw(st.sampled_from(factors))
        return {"shape": shape[:at] + [factor, shape[at] // factor] + shape[at + 1:]}
    return {"shape": [-1]}


def _flatten(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    start = _dim(draw, shapes[0])
    return {"start": start, "end": draw(st.integers(start, max(len(shapes[0]) - 1, start)))}


def _unsqueeze(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"dim": draw(st.integers(0, len(shapes[0])))}


def _squeeze(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    ones = [d for d, side in enumerate(shapes[0]) if side == 1]
    return {"dim": draw(st.sampled_from(ones)) if ones else _dim(draw, shapes[0])}


def _expand(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"shape": [draw(st.integers(2, 4)) if side == 1 else side for side in shapes[0]]}


def _narrow(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    dim = _dim(draw, shapes[0])
    side = shapes[0][dim] if shapes[0] else 1
    start = draw(st.integers(0, max(side - 1, 0)))
    return {"dim": dim, "start": start, "length": draw(st.integers(1, max(side - start, 1)))}


def _select(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    dim = _dim(draw, shapes[0])
    return {"dim": dim, "index": draw(st.integers(0, max((shapes[0][dim] if shapes[0] else 1) - 1, 0)))}


def _index_select(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    dim = _dim(draw, shapes[0])
    side = shapes[0][dim] if shapes[0] else 1
    return {"dim": dim, "index": draw(st.lists(st.integers(0, max(side - 1, 0)), min_size=1, max_size=4))}


def _cast(draw: Draw, shapes: Sequence[Shape], dtypes: Sequence[str] = CAST_DTYPES) -> dict[str, Any]:
    return {"dtype": draw(st.sampled_from(dtypes))}


def _to_int(draw: Draw, shapes: Sequence[Shape], dtypes: Sequence[str] = tuple(INT_RANGES)) -> dict[str, Any]:
    """An integer dtype, a scale (large ones reach the dtype's ends) and the dtype's range."""
    dtype = draw(st.sampled_from(dtypes))
    low, high = INT_RANGES[dtype]
    return {"dtype": dtype, "scale": draw(st.sampled_from(INT_SCALES)), "lo": low, "hi": high}


def _int_scalar(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"k": draw(st.sampled_from(INT_SCALARS))}


def _shift(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"s": draw(st.sampled_from(SHIFTS))}


def _round_decimals(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"d": draw(st.sampled_from((1, 2, -1)))}


def _correction(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    """A correction below the reduced dim's size (at or above it the result is inf or NaN)."""
    params = _reduce_params(draw, shapes)
    side = shapes[0][params["dim"]] if shapes[0] else 1
    return {**params, "c": draw(st.sampled_from([c for c in (0, 1, 2) if c < side] or [0]))}


def _index_put(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    """Rows of dim 0 (repeats included: accumulated, or the same value written twice)."""
    side = shapes[0][0] if shapes[0] else 1
    return {"index": draw(st.lists(st.integers(0, side - 1), min_size=1, max_size=4)),
            "s": draw(st.sampled_from(SCALARS)), "acc": draw(st.booleans())}


def _index_add(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    """Indices along a dim (repeats accumulate) and as many leading slices as the source."""
    dim = _dim(draw, shapes[0])
    side = shapes[0][dim] if shapes[0] else 1
    index = draw(st.lists(st.integers(0, side - 1), min_size=1, max_size=side))
    return {"dim": dim, "index": index, "count": len(index)}


def _index_fill(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {**_index_select(draw, shapes), "s": draw(st.sampled_from(SCALARS))}


def _conv(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, 1))}


def _last_dim(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    return {"n": shapes[0][-1] if shapes[0] else 1}


def _groups(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    channels = shapes[0][1] if len(shapes[0]) > 1 else 1
    return {"groups": draw(st.sampled_from([g for g in range(1, channels + 1) if channels % g == 0]))}


def _cat_params(draw: Draw, shapes: Sequence[Shape]) -> dict[str, Any]:
    """The dim along which the two operands differ, or any dim when they are alike."""
    differing = [d for d, (x, y) in enumerate(zip(*shapes)) if x != y]
    return {"dim": differing[0] if differing else _dim(draw, shapes[0])}


# Second operands: which existing shapes fit, and the shape of a new input that fits.
def _broadcasts_to(first: Shape, second: Shape) -> bool:
    if len(second) > len(first):
        return False
    return all(s in (1, f) for f, s in zip(first[len(first) - len(second):], second))


def _broadcast_shape(draw: Draw, first: Shape) -> Shape:
    drop = draw(st.integers(0, len(first)))
    return tuple(1 if draw(st.booleans()) else side for side in first[drop:])


def _matmul_fits(first: Shape, second: Shape) -> bool:
    return len(first) >= 2 and len(second) == 2 and second[0] == first[-1]


def _matmul_shape(draw: Draw, first: Shape) -> Shape:
    return (first[-1] if first else 1, draw(st.integers(1, 6)))


def _linear_fits(first: Shape, second: Shape) -> bool:
    return len(first) >= 1 and len(second) == 2 and second[1] == first[-1]


def _linear_shape(draw: Draw, first: Shape) -> Shape:
    return (draw(st.integers(1, 6)), first[-1] if first else 1)


def _conv_fits(first: Shape, second: Shape) -> bool:
    return len(first) == 4 and len(second) == 4 and second[1] == first[1] and second[2] == second[3] <= 3


def _conv_shape(draw: Draw, first: Shape) -> Shape:
    kernel = draw(st.integers(1, 3))
    return (draw(st.integers(1, 4)), first[1] if len(first) > 1 else 1, kernel, kernel)


def _cat_fits(first: Shape, second: Shape) -> bool:
    return len(first) == len(second) and sum(x != y for x, y in zip(first, second)) <= 1


def _cat_shape(draw: Draw, first: Shape) -> Shape:
    dim = _dim(draw, first)
    return tuple(draw(st.integers(1, 4)) if d == dim else side for d, side in enumerate(first))


def _same_shape(draw: Draw, first: Shape) -> Shape:
    return first


@dataclass(frozen=True)
class Partner:
    """How an op's second operand relates to its first: ``fits`` an existing value's shape, or
    ``new_shape`` draws the shape of a new program input that fits."""

    fits: Callable[[Shape, Shape], bool]
    new_shape: Callable[[Draw, Shape], Shape]


BROADCAST = Partner(_broadcasts_to, _broadcast_shape)
MATMUL = Partner(_matmul_fits, _matmul_shape)
LINEAR = Partner(_linear_fits, _linear_shape)
CONV = Partner(_conv_fits, _conv_shape)
CAT = Partner(_cat_fits, _cat_shape)
SAME = Partner(lambda first, second: first == second, _same_shape)


@dataclass(frozen=True)
class OpSpec:
    """One op a program may contain.

    ``template``: a torch expression, ``{a}`` (and ``{b}`` with a ``partner``) the operands and
    the other fields ``params``' keys. ``min_rank``: the first operand's least rank.
    ``aliases``: the result may share the first operand's storage (views, in-place ops), so an
    in-place op must not follow it onto a program input. ``inplace``: overwrites ``{a}``.
    ``same_dtype``: the operands must have one dtype (a check the CPU kernel makes and the meta
    function does not). ``golden_template``: the expression in the float64 run, when it differs.
    ``accepts``: the operands' dtype kinds (``FLOAT``, ``INT``, ``BOOL``). ``may_alias``: the
    result is its operand itself or a copy depending on the dtype (``x.to(x.dtype)`` is ``x``),
    while the float64 run's is always a copy, so nothing is written into it. ``weight``: how many
    times the op is listed when ops are drawn. ``casts_to``: the dtypes its ``dtype`` parameter
    is drawn from, which ``params`` takes as ``dtypes`` (steered: ``mluverify.fuzz.coverage``).
    """

    name: str
    family: str
    template: str
    params: Callable[[Draw, Sequence[Shape]], dict[str, Any]] = _no_params
    partner: Partner | None = None
    min_rank: int = 0
    aliases: bool = False
    inplace: bool = False
    same_dtype: bool = False
    golden_template: str = ""
    accepts: tuple[str, ...] = (FLOAT,)
    may_alias: bool = False
    weight: int = 1
    casts_to: tuple[str, ...] = ()

    @property
    def operands(self) -> int:
        return 2 if self.partner else 1

    def expression(self, operands: Sequence[str], params: Mapping[str, Any], *, golden: bool = False) -> str:
        """The op applied to the named operands, as Python source; ``golden``: as the float64
        run computes it (a cast rounds to its dtype and widens back, so float64 flows on)."""
        names = dict(zip("ab", operands))
        return (self.golden_template if golden and self.golden_template else self.template).format(**names, **params)


def _unary(name: str, template: str, **kwargs: Any) -> OpSpec:
    return OpSpec(name, "pointwise", template, **kwargs)


def _integer(name: str, template: str, params: Callable = _no_params, **kwargs: Any) -> OpSpec:
    return OpSpec(name, "integer", template, params, **{"accepts": (INT,), "weight": 2, **kwargs})


OPS: tuple[OpSpec, ...] = (
    _unary("relu", "torch.relu({a})", accepts=NUMBER),
    _unary("sigmoid", "torch.sigmoid({a})"),
    _unary("tanh", "torch.tanh({a})"),
    _unary("gelu", "torch.nn.functional.gelu({a})"),
    _unary("silu", "torch.nn.functional.silu({a})"),
    _unary("exp", "torch.exp({a})"),
    _unary("log", "torch.log(%s)" % MAGNITUDE),
    _unary("sqrt", "torch.sqrt(%s)" % MAGNITUDE),
    _unary("rsqrt", "torch.rsqrt(%s)" % MAGNITUDE),
    _unary("reciprocal", "torch.reciprocal({a})"),
    _unary("abs", "torch.abs({a})", accepts=NUMBER),
    _unary("neg", "torch.neg({a})", accepts=NUMBER),
    _unary("sin", "torch.sin({a})"),
    _unary("cos", "torch.cos({a})"),
    _unary("square", "torch.square({a})", accepts=NUMBER),
    _unary("clamp", "torch.clamp({a}, {lo}, {hi})", params=_clamp, accepts=NUMBER),
    _unary("add_scalar", "({a} + {s})", params=_scalar, accepts=NUMBER),
    _unary("mul_scalar", "({a} * {s})", params=_scalar, accepts=NUMBER),
    OpSpec("add", "binary", "torch.add({a}, {b})", partner=BROADCAST, accepts=NUMBER),
    OpSpec("sub", "binary", "torch.sub({a}, {b})", partner=BROADCAST, accepts=NUMBER),
    OpSpec("mul", "binary", "torch.mul({a}, {b})", partner=BROADCAST, accepts=NUMBER),
    OpSpec("div", "binary", "torch.div({a}, {b})", partner=BROADCAST),
    OpSpec("atan2", "binary", "torch.atan2({a}, {b})", partner=BROADCAST),
    OpSpec("copysign", "binary", "torch.copysign({a}, {b})", partner=BROADCAST),
    OpSpec("maximum", "binary", "torch.maximum({a}, {b})", partner=BROADCAST, accepts=ANY),
    OpSpec("minimum", "binary", "torch.minimum({a}, {b})", partner=BROADCAST, accepts=ANY),
    OpSpec("where", "binary", "torch.where({a} > 0, {a}, {b})", partner=BROADCAST, accepts=ANY),
    OpSpec("sum", "reduction", "torch.sum({a}, dim={dim}, keepdim={keepdim})", _reduce_params, min_rank=1,
           accepts=NUMBER),
    OpSpec("mean", "reduction", "torch.mean({a}, dim={dim}, keepdim={keepdim})", _reduce_params, min_rank=1),
    OpSpec("amax", "reduction", "torch.amax({a}, dim={dim}, keepdim={keepdim})", _reduce_params, min_rank=1,
           accepts=NUMBER),
    OpSpec("amin", "reduction", "torch.amin({a}, dim={dim}, keepdim={keepdim})", _reduce_params, min_rank=1,
           accepts=NUMBER),
    OpSpec("logsumexp", "reduction", "torch.logsumexp({a}, dim={dim}, keepdim={keepdim})", _reduce_params,
           min_rank=1),
    OpSpec("var", "reduction", "torch.var({a}, dim={dim}, correction=0, keepdim={keepdim})", _reduce_params,
           min_rank=1),
    OpSpec("sum_all", "reduction", "torch.sum({a})", accepts=NUMBER),
    # IEEE 754 keeps a leading run of -0.0 in a running sum (-0.0 + -0.0 is -0.0); torch's CPU
    # cumsum starts from +0.0 and drops it (pytorch/pytorch#195851, open), so the float64 run
    # restores it and a target that keeps it is cleared as the CPU's own error.
    OpSpec("cumsum", "reduction", "torch.cumsum({a}, dim={dim})", _dim_param, min_rank=1, accepts=NUMBER,
           golden_template="torch.where(torch.cumprod(torch.signbit({a}) & ({a} == 0), dim={dim}).bool(), "
                           "torch.zeros_like({a}).neg(), torch.cumsum({a}, dim={dim}))"),
    OpSpec("matmul", "matmul", "torch.matmul({a}, {b})", partner=MATMUL, min_rank=2, same_dtype=True),
    OpSpec("linear", "matmul", "torch.nn.functional.linear({a}, {b})", partner=LINEAR, min_rank=1, same_dtype=True),
    OpSpec("conv2d", "matmul", "torch.nn.functional.conv2d({a}, {b}, stride={stride}, padding={padding})",
           _conv, partner=CONV, min_rank=4, same_dtype=True),
    OpSpec("layer_norm", "norm", "torch.nn.functional.layer_norm({a}, [{n}])", _last_dim, min_rank=1),
    OpSpec("rms_norm", "norm", "torch.nn.functional.rms_norm({a}, [{n}])", _last_dim, min_rank=1),
    OpSpec("group_norm", "norm", "torch.nn.functional.group_norm({a}, {groups})", _groups, min_rank=2),
    OpSpec("softmax", "softmax", "torch.softmax({a}, dim={dim})", _dim_param, min_rank=1),
    OpSpec("log_softmax", "softmax", "torch.log_softmax({a}, dim={dim})", _dim_param, min_rank=1),
    OpSpec("transpose", "view", "torch.transpose({a}, {dim0}, {dim1})", _transpose, min_rank=2,
           aliases=True, accepts=ANY),
    OpSpec("permute", "view", "{a}.permute({perm})", _permute, min_rank=2,
           aliases=True, accepts=ANY),
    OpSpec("reshape", "view", "torch.reshape({a}, {shape})", _reshape,
           aliases=True, accepts=ANY),
    OpSpec("flatten", "view", "torch.flatten({a}, {start}, {end})", _flatten, min_rank=1,
           aliases=True, accepts=ANY),
    OpSpec("unsqueeze", "view", "torch.unsqueeze({a}, {dim})", _unsqueeze,
           aliases=True, accepts=ANY),
    OpSpec("squeeze", "view", "torch.squeeze({a}, {dim})", _squeeze, min_rank=1,
           aliases=True, accepts=ANY),
    OpSpec("expand", "view", "{a}.expand({shape})", _expand,
           aliases=True, accepts=ANY),
    OpSpec("cat", "concat", "torch.cat([{a}, {b}], dim={dim})", _cat_params, partner=CAT, min_rank=1, accepts=ANY),
    OpSpec("stack", "concat", "torch.stack([{a}, {b}], dim={dim})", _dim_param, partner=SAME, accepts=ANY),
    OpSpec("narrow", "index", "torch.narrow({a}, {dim}, {start}, {length})", _narrow, min_rank=1,
           aliases=True, accepts=ANY),
    OpSpec("select", "index", "torch.select({a}, {dim}, {index})", _select, min_rank=1,
           aliases=True, accepts=ANY),
    OpSpec("index_select", "index", "torch.index_select({a}, {dim}, torch.tensor({index}, device={a}.device))",
           _index_select, min_rank=1, accepts=ANY),
    OpSpec("flip", "index", "torch.flip({a}, [{dim}])", _dim_param, min_rank=1, accepts=ANY),
    OpSpec("cast", "cast", "{a}.to(torch.{dtype})", _cast, golden_template="{a}.to(torch.{dtype}).to(torch.float64)",
           accepts=ANY, may_alias=True, weight=2, casts_to=CAST_DTYPES),
    OpSpec("to_int", "cast", "{a}.float().mul({scale}).clamp({lo}, {hi}).to(torch.{dtype})", _to_int,
           weight=4, casts_to=tuple(INT_RANGES)),
    OpSpec("to_bool", "cast", "({a} > 0)", accepts=ANY),
    _unary("round", "torch.round({a})"),
    _unary("round_decimals", "torch.round({a}, decimals={d})", params=_round_decimals),
    _unary("trunc", "torch.trunc({a})"),
    _unary("floor", "torch.floor({a})"),
    _unary("sign", "torch.sign({a})", accepts=NUMBER),
    _unary("logical_not", "torch.logical_not({a})", accepts=ANY),
    OpSpec("clamp_min_tensor", "binary", "torch.clamp({a}, min={b})", partner=BROADCAST, accepts=NUMBER),
    OpSpec("masked_fill", "binary", "{a}.masked_fill({b} > 0, {s})", _scalar, partner=BROADCAST, accepts=ANY),
    OpSpec("logical_and", "binary", "torch.logical_and({a}, {b})", partner=BROADCAST, accepts=ANY),
    OpSpec("logical_xor", "binary", "torch.logical_xor({a}, {b})", partner=BROADCAST, accepts=ANY),
    OpSpec("std", "reduction", "torch.std({a}, dim={dim}, correction={c}, keepdim={keepdim})", _correction,
           min_rank=1),
    OpSpec("prod", "reduction", "torch.prod({a}, dim={dim}, keepdim={keepdim})", _reduce_params, min_rank=1,
           accepts=NUMBER),
    OpSpec("cumprod", "reduction", "torch.cumprod({a}, dim={dim})", _dim_param, min_rank=1, accepts=NUMBER),
    OpSpec("argmax", "reduction", "torch.argmax({a}, dim={dim}, keepdim={keepdim})", _reduce_params,
           min_rank=1, accepts=NUMBER),
    OpSpec("argmin", "reduction", "torch.argmin({a}, dim={dim}, keepdim={keepdim})", _reduce_params,
           min_rank=1, accepts=NUMBER),
    OpSpec("sort_values", "index", "torch.sort({a}, dim={dim}, stable=True)[0]", _dim_param, min_rank=1,
           accepts=NUMBER),
    OpSpec("sort_indices", "index", "torch.sort({a}, dim={dim}, stable=True)[1]", _dim_param, min_rank=1,
           accepts=NUMBER),
    _integer("floor_divide", "torch.floor_divide({a}, %s)" % DIVISOR, partner=BROADCAST, accepts=NUMBER),
    _integer("div_trunc", "torch.div({a}, %s, rounding_mode='trunc')" % DIVISOR, partner=BROADCAST,
             accepts=NUMBER),
    _integer("div_floor", "torch.div({a}, %s, rounding_mode='floor')" % DIVISOR, partner=BROADCAST,
             accepts=NUMBER),
    _integer("remainder", "torch.remainder({a}, %s)" % DIVISOR, partner=BROADCAST, accepts=NUMBER),
    _integer("fmod", "torch.fmod({a}, %s)" % DIVISOR, partner=BROADCAST, accepts=NUMBER),
    _integer("bitwise_and", "torch.bitwise_and({a}, {b})", partner=BROADCAST, accepts=INTEGRAL),
    _integer("bitwise_or", "torch.bitwise_or({a}, {b})", partner=BROADCAST, accepts=INTEGRAL),
    _integer("bitwise_xor", "torch.bitwise_xor({a}, {b})", partner=BROADCAST, accepts=INTEGRAL),
    _integer("bitwise_not", "torch.bitwise_not({a})", accepts=INTEGRAL),
    _integer("shift_left", "({a} << {s})", _shift),
    _integer("shift_right", "({a} >> {s})", _shift),
    _integer("shift_left_tensor", "torch.bitwise_left_shift({a}, {b} % 70)", partner=BROADCAST),
    _integer("shift_right_tensor", "torch.bitwise_right_shift({a}, {b} % 70)", partner=BROADCAST),
    _integer("mul_int", "({a} * {k})", _int_scalar),
    _integer("sum_keep_dtype", "torch.sum({a}, dim={dim}, keepdim={keepdim}, dtype={a}.dtype)", _reduce_params,
             min_rank=1),
    _integer("cumsum_keep_dtype", "torch.cumsum({a}, dim={dim}, dtype={a}.dtype)", _dim_param, min_rank=1),
    OpSpec("relu_", "inplace", "{a}.relu_()", inplace=True, aliases=True, accepts=NUMBER),
    OpSpec("add_", "inplace", "{a}.add_({s})", _scalar, inplace=True, aliases=True),
    OpSpec("mul_", "inplace", "{a}.mul_({s})", _scalar, inplace=True, aliases=True),
    OpSpec("add_tensor_", "inplace", "{a}.add_({b})", partner=BROADCAST, inplace=True, aliases=True,
           accepts=NUMBER),
    OpSpec("copy_", "inplace", "{a}.copy_({b})", partner=BROADCAST, inplace=True,
           aliases=True, accepts=ANY),
    OpSpec("masked_fill_", "inplace", "{a}.masked_fill_({b} > 0, {s})", _scalar, partner=BROADCAST, inplace=True,
           aliases=True, accepts=ANY),
    OpSpec("index_put_", "inplace", "{a}.index_put_((torch.tensor({index}, device={a}.device),), "
           "torch.tensor({s}, device={a}.device).to({a}.dtype), accumulate={acc})", _index_put, min_rank=1,
           inplace=True, aliases=True, accepts=NUMBER),
    OpSpec("index_add_", "inplace", "{a}.index_add_({dim}, torch.tensor({index}, device={a}.device), "
           "torch.narrow({a}, {dim}, 0, {count}).clone())", _index_add, min_rank=1, inplace=True, aliases=True,
           accepts=NUMBER),
    OpSpec("index_fill_", "inplace", "{a}.index_fill_({dim}, torch.tensor({index}, device={a}.device), {s})",
           _index_fill, min_rank=1, inplace=True, aliases=True, accepts=NUMBER),
    OpSpec("clamp_", "inplace", "{a}.clamp_({lo}, {hi})", _clamp, inplace=True, aliases=True),
    OpSpec("mul_int_", "inplace", "{a}.mul_({k})", _int_scalar, inplace=True, aliases=True, accepts=(INT,)),
)

REGISTRY: Mapping[str, OpSpec] = {op.name: op for op in OPS}

# The ops whose expression version 1 of the program format restricted further, as it did:
# a version-1 program reads ``div`` as ``div_v1``. Never drawn.
LEGACY_V1: Mapping[str, OpSpec] = {op.name.removesuffix("_v1"): op for op in (
    _unary("log_v1", "torch.log({a}.abs() + 0.5)"),
    _unary("sqrt_v1", "torch.sqrt({a}.abs())"),
    _unary("rsqrt_v1", "torch.rsqrt({a}.abs() + 0.5)"),
    _unary("reciprocal_v1", "torch.reciprocal({a}.abs() + 0.5)"),
    OpSpec("div_v1", "binary", "torch.div({a}, {b}.abs() + 0.5)", partner=BROADCAST),
)}
_KNOWN: Mapping[str, OpSpec] = {**REGISTRY, **{op.name: op for op in LEGACY_V1.values()}}


def op_set(names: Sequence[str] | None = None) -> tuple[OpSpec, ...]:
    """The ops named (each an op or, where no op has the name, a family), or every op; an
    unknown name raises InvalidArgument listing the ops and families."""
    if not names:
        return OPS
    chosen: dict[str, OpSpec] = {}
    for name in names:
        if name in REGISTRY:
            chosen[name] = REGISTRY[name]
        elif name in FAMILIES:
            chosen.update((op.name, op) for op in OPS if op.family == name)
        else:
            raise valid_choice("fuzz op or op family", name, [*REGISTRY, *FAMILIES])
    return tuple(chosen.values())


def spec(name: str) -> OpSpec:
    """The op called ``name`` (a ``LEGACY_V1`` one included); InvalidArgument lists the ops."""
    try:
        return _KNOWN[name]
    except KeyError:
        raise valid_choice("fuzz op", name, list(REGISTRY)) from None


__all__ = ["ANY", "BOOL", "CAST_DTYPES", "FAMILIES", "FLOAT", "INT", "LEGACY_V1", "MAGNITUDE", "OPS", "OpSpec",
           "Partner", "REGISTRY", "op_set", "spec"]
