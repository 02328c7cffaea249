"""Hypothesis strategies for op inputs that compose: shapes, value distributions, layouts.

Elements are drawn through hypothesis (``hypothesis.extra.numpy.arrays``), so a failure
shrinks to a minimal shape *and* minimal values, and replays from the example database or a
``@reproduce_failure`` blob::

    @given(x=tensors(shapes(min_dims=2)))
    def test_relu(verify, x): verify(torch.relu, x, op="relu")

Hypothesis holds a few hundred elements per example at most, so it draws every element of a
small tensor (``_ALL_DRAWN``) but only a sparse set of a larger one (about sqrt(n): ``arrays``'
``fill``); the others come from a numpy generator seeded by hypothesis, which holds the
distribution's bulk only (normal or uniform values, the special values). A distribution's rare
values (the outliers' +-1e3 spikes, the non-finite values, the probes) come from drawn elements
alone (a third of the drawn ones each: a tensor of n > 64 elements carries about sqrt(n) / 3
spikes, 0.4 % of 6561), so a failure that needs one always holds a drawn one, and the drawn
elements are the ones a failure shrinks to: the fill's seed costs more choices than an element (``_FILL_SEED``), so a
failure ends at a minimal shape whose failing values are drawn ones
(``find(tensors(), lambda t: bool((t.abs() > 2.5).any()))`` ends at ``[3.]``,
``find(tensors(distributions=("outliers",)), lambda t: bool((t.abs() > 100).any()))`` at
``[1000.]``). Left open: a failure that only a larger tensor's bulk hits, at a value its drawn
elements seldom take (``|x| > 990`` of ``wide_uniform``), may end in the bulk of the smallest
tensor that has one (over 64 elements): a seeded value changes with the seed or the shape, so the
shrinker cannot move it.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


# How values are spread: every op suite draws from these unless the op restricts its domain.
DISTRIBUTIONS = ("normal", "wide_uniform", "outliers", "special")
# For ops that define results at +-inf and NaN: normal values with some non-finite ones.
NONFINITE = "nonfinite"

# Values an op must handle where it defines them (signed zeros, tiny and huge magnitudes); the
# ``special`` distribution adds float32 subnormals to these.
SPECIAL_VALUES = (0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 3.0e4, -3.0e4, 0.5, 2.0)

_SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)
# "normal": hypothesis cannot draw a Gaussian, so values within 4 sigma of a standard one.
_NORMAL = st.floats(-4.0, 4.0, width=32)
_WIDE = st.floats(-1e3, 1e3, width=32)
_SPIKES = st.sampled_from((-1e3, 1e3))
_SUBNORMALS = st.floats(-_SMALLEST_NORMAL, _SMALLEST_NORMAL, width=32, allow_subnormal=True)
_SPECIAL = st.one_of(st.sampled_from(SPECIAL_VALUES), _SUBNORMALS)
_NON_FINITE_VALUES = st.sampled_from((math.inf, -math.inf, math.nan))

# Simple values, the quarters in [-4, 4]: where kernels branch (floor and round boundaries at
# integers, ties at halves, thresholds and clamp bounds written as short constants).
_SIMPLE = st.integers(-16, 16).map(lambda quarters: quarters / 4)
# Probes of every distribution: values that overflow nothing yet break kernels (a sign lost on
# -0.0, subnormals flushed to zero, a branch taken at its boundary), so every tensor may carry a few.
_PROBES = st.one_of(st.sampled_from((0.0, -0.0)), _SUBNORMALS, _SIMPLE)

# distribution -> the strategy of the elements hypothesis draws
_ELEMENTS: Mapping[str, st.SearchStrategy[float]] = {
    "normal": st.one_of(_NORMAL, _PROBES),
    "wide_uniform": st.one_of(_WIDE, _PROBES),
    "outliers": st.one_of(_NORMAL, _SPIKES, _PROBES),
    "special": _SPECIAL,
    NONFINITE: st.one_of(_NORMAL, _NON_FINITE_VALUES, _PROBES),
}
# Marks, in the float64 array hypothesis draws, an element it left to the seeded generator:
# no element strategy above draws it (all are float32 values).
_SEEDED = 1e300
# The seed of the generator that fills the rest, drawn only when there is a rest, and in more
# choices (6 bytes) than one drawn element takes: hypothesis shrinks to the example of fewest
# choices first, so a tensor whose failing value sits in the fill is never simpler than the one
# element drawn at its simplest failing value; a shrunk failure ends at drawn values. The fill's
# values are spread as before (any seed gives the distribution), so examples are too.
_FILL_SEED = st.tuples(*[st.integers(0, 255)] * 6)
# Tensors of at most this many elements have every element drawn (no seeded fill): a failure in a
# small tensor always shrinks, at the cost of at most ~200 choices per tensor.
_ALL_DRAWN = 64


def shapes(min_dims: int = 1, max_dims: int = 4, min_side: int = 1,
           max_side: int = 9) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes with size-1 and odd dimensions; they shrink towards ``min_dims`` x ``min_side``."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(shape: Sequence[int]) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape that broadcasts against ``shape``: at most as many dims, trailing ones kept or 1."""
    return hnp.broadcastable_shapes(tuple(shape), min_dims=0, max_dims=len(shape), min_side=1,
                                    max_side=max(shape, default=1))


def values(distribution: str) -> st.SearchStrategy[float]:
    """The strategy of the elements hypothesis draws for ``distribution`` (``DISTRIBUTIONS`` or
    ``NONFINITE``)."""
    try:
        return _ELEMENTS[distribution]
    except KeyError:
        raise ValueError(f"unknown distribution {distribution!r}; "
                         f"valid: {', '.join((*DISTRIBUTIONS, NONFINITE))}") from None


def _seeded_values(size: int, distribution: str, seed: int) -> np.ndarray:
    """``size`` float64 values of ``distribution``'s bulk from a numpy generator seeded by
    ``seed``: ``outliers`` and ``nonfinite`` tensors take their spikes and non-finite values from
    drawn elements only (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if distribution == "wide_uniform":
        return rng.uniform(-1e3, 1e3, size)
    if distribution == "special":
        return rng.choice(np.array(SPECIAL_VALUES), size)
    return rng.normal(0.0, 1.0, size)


@st.composite
def arrays(draw, shape: Sequence[int], distribution: str, *, low: float | None = None,
           high: float | None = None) -> np.ndarray:
    """A float32 array of ``shape`` with elements from ``distribution``: all drawn by hypothesis
    in a small array, a sparse set in a larger one, the rest from a seeded generator (see the
    module docstring).

    ``low`` / ``high`` restrict the domain (e.g. ``low=1e-3`` for log or sqrt); values are
    clipped into it after drawing, so NaN stays NaN.
    """
    shape = tuple(int(side) for side in shape)
    elements = values(distribution)
    fill = st.nothing() if math.prod(shape) <= _ALL_DRAWN else st.just(_SEEDED)
    drawn = draw(hnp.arrays(np.float64, shape, elements=elements, fill=fill))
    seeded = drawn == _SEEDED
    if seeded.any():
        seed = int.from_bytes(bytes(draw(_FILL_SEED)), "little")
        drawn[seeded] = _seeded_values(math.prod(shape), distribution, seed).reshape(shape)[seeded]
    if low is not None or high is not None:
        drawn = np.clip(drawn, low, high)
    return drawn.astype(np.float32)


def special_points(dtype: str = "float32") -> np.ndarray:
    """The points where ops are defined but special, as float32 values ``dtype`` holds: signed
    zeros, +-1, the smallest subnormal, smallest normal and largest finite value of ``dtype``
    with both signs, and the signed infinities. The op suites try every op at each of them
    (each pair for a binary op) where the op is defined, a case of its own."""
    info = np.finfo(dtype)
    magnitudes = (0.0, 1.0, info.smallest_subnormal, info.tiny, info.max, math.inf)
    return np.array([value for magnitude in magnitudes for value in (magnitude, -magnitude)], dtype=np.float32)


def on_grid(array: np.ndarray, dtype: str) -> np.ndarray:
    """float32 ``array`` rounded to the values ``dtype`` can hold (kept float32; out-of-range
    values clipped to its largest finite value, non-finite ones kept).

    Inputs on the device precision's grid make the float32 CPU reference see the very values
    the device computes with, so a comparison measures the op, not the rounding of its input.
    """
    if dtype == "float32":
        return array
    limit = float(np.finfo(dtype).max)
    finite = np.isfinite(array)
    clipped = np.where(finite, np.clip(array, -limit, limit), array)
    return clipped.astype(dtype).astype(np.float32)


@st.composite
def tensors(draw, shape_strategy=None, *, distributions: Sequence[str] = DISTRIBUTIONS,
            low: float | None = None, high: float | None = None, non_contiguous: bool = True,
            grid: str = "float32"):
    """A float32 CPU tensor: a drawn shape, a drawn value distribution, maybe a strided view.

    ``shape_strategy`` may also be a fixed shape (tuple); ``grid="float16"`` draws values a
    float16 tensor holds exactly (see ``on_grid``).
    """
    import torch

    # Distribution and layout come before the shape, and the layout is drawn for every rank:
    # a shape that shrinks then leaves the element choices where they were, so the shrinker
    # can cut a tensor down to the element that fails.
    distribution = draw(st.sampled_from(list(distributions)))
    transposed = non_contiguous and draw(st.booleans())
    if isinstance(shape_strategy, tuple):
        shape = shape_strategy
    else:
        shape = draw(shape_strategy if shape_strategy is not None else shapes())
    if transposed and len(shape) >= 2:
        # Build the transposed storage, then transpose back: same shape, non-contiguous strides.
        swapped = (*shape[:-2], shape[-1], shape[-2])
        array = on_grid(np.asarray(draw(arrays(swapped, distribution, low=low, high=high))), grid)
        return torch.from_numpy(array).transpose(-1, -2)
    # np.asarray: a 0-d draw comes back as a numpy scalar, which torch.from_numpy refuses
    return torch.from_numpy(on_grid(np.asarray(draw(arrays(shape, distribution, low=low, high=high))), grid))


def search_score(diagnostics: Mapping[str, float], value: float) -> float:
    """What ``hypothesis.target`` should climb for one verdict: the raw relative error
    (``raw_rel_mse``, rel_mse without Cambricon's eps rule), which moves where the judged
    rel_mse is zeroed; else the judged ``value`` (e.g. exact: elements that differ).
    Non-finite scores become the largest float, since ``target`` takes finite numbers only."""
    score = diagnostics.get("raw_rel_mse", value)
    return score if math.isfinite(score) else np.finfo(np.float64).max
