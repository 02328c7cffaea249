"""Hypothesis strategies for op inputs that compose: shapes, value distributions, layouts.

Values are drawn from a seeded numpy generator (the seed comes from hypothesis, so examples
shrink and replay), which keeps large tensors cheap to build::

    @given(x=tensors(shapes(min_dims=2)), dist=...)
    def test_relu(verify, x): verify(torch.relu, x, op="relu")
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from hypothesis import strategies as st

# How values are spread: every op suite draws from these unless the op restricts its domain.
DISTRIBUTIONS = ("normal", "wide_uniform", "outliers", "special")
# For ops that define results at +-inf and NaN: normal values with some non-finite ones.
NONFINITE = "nonfinite"

# Values an op must handle where it defines them (signed zeros, tiny and huge magnitudes).
SPECIAL_VALUES = (0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 3.0e4, -3.0e4, 0.5, 2.0)


@st.composite
def shapes(draw, min_dims: int = 1, max_dims: int = 4, min_side: int = 1, max_side: int = 9) -> tuple[int, ...]:
    """Shapes with size-1 and odd dimensions (as many as hypothesis wants to try)."""
    rank = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.integers(min_side, max_side)) for _ in range(rank))


@st.composite
def broadcastable_shapes(draw, shape: Sequence[int]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: trailing dims kept, some set to 1, some dropped."""
    drop = draw(st.integers(0, len(shape)))
    kept = shape[drop:]
    return tuple(1 if draw(st.booleans()) else side for side in kept)


def values(shape: Sequence[int], distribution: str, seed: int, *, low: float | None = None,
           high: float | None = None) -> np.ndarray:
    """float32 values of ``shape`` from ``distribution``, deterministic in ``seed``.

    ``low`` / ``high`` restrict the domain (e.g. ``low=1e-3`` for log or sqrt); values are
    clipped into it after drawing.
    """
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape)) if len(shape) else 1
    if distribution == "normal":
        flat = rng.normal(0.0, 1.0, size)
    elif distribution == "wide_uniform":
        flat = rng.uniform(-1e3, 1e3, size)
    elif distribution == "outliers":
        flat = rng.normal(0.0, 1.0, size)
        spikes = rng.random(size) < 0.01
        flat[spikes] = rng.choice([-1e3, 1e3], spikes.sum())
    elif distribution == "special":
        flat = rng.choice(np.array(SPECIAL_VALUES), size)
    elif distribution == NONFINITE:
        flat = rng.normal(0.0, 1.0, size)
        odd = rng.random(size) < 0.1
        flat[odd] = rng.choice([np.inf, -np.inf, np.nan], odd.sum())
    else:
        raise ValueError(f"unknown distribution {distribution!r}; valid: {', '.join((*DISTRIBUTIONS, NONFINITE))}")
    if low is not None or high is not None:
        flat = np.clip(flat, low, high)
    return flat.astype(np.float32).reshape(tuple(shape))


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

    if isinstance(shape_strategy, tuple):
        shape = shape_strategy
    else:
        shape = draw(shape_strategy if shape_strategy is not None else shapes())
    distribution = draw(st.sampled_from(list(distributions)))
    seed = draw(st.integers(0, 2**31 - 1))
    if non_contiguous and len(shape) >= 2 and draw(st.booleans()):
        # Build the transposed storage, then transpose back: same shape, non-contiguous strides.
        swapped = (*shape[:-2], shape[-1], shape[-2])
        array = on_grid(values(swapped, distribution, seed, low=low, high=high), grid)
        return torch.from_numpy(array).transpose(-1, -2)
    return torch.from_numpy(on_grid(values(shape, distribution, seed, low=low, high=high), grid))
