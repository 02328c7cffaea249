"""Reductions and softmax over a drawn dim: sum / mean / var / std / max / min / argmax /
argmin / softmax / log_softmax / _safe_softmax / cumsum / vector norm / sort / topk / histc
(float16 accumulates in float32 on the device)."""
from __future__ import annotations

from typing import Callable, NamedTuple

import hypothesis
import pytest
import torch
from hypothesis import given, strategies as st

from mluverify.strategies import shapes, search_score, tensors


class Reduction(NamedTuple):
    name: str
    fn: Callable  # fn(x, dim)
    half_limit: float  # |input| bound in float16 so the result fits (sums of up to 18**3 values)


# Two or three sides of 8 to 18 (at most 18^3 = 5832 elements, within the float16 limits
# below): every reduction splits across the device's cores, so its accumulation order
# (docs/device.md, "Reductions") is what the case measures, not a sum of three or fewer
# elements, which four cores add in the CPU's own order.
REDUCED_SHAPES = shapes(min_dims=2, max_dims=3, min_side=8, max_side=18)

REDUCTIONS = (
    Reduction("sum", lambda x, dim: torch.sum(x), 5.0),
    Reduction("sum_dim", lambda x, dim: torch.sum(x, dim), 1e3),
    Reduction("sum_dim_keepdim", lambda x, dim: torch.sum(x, dim, keepdim=True), 1e3),
    Reduction("mean", lambda x, dim: torch.mean(x), 6e4),
    Reduction("mean_dim", lambda x, dim: torch.mean(x, dim), 6e4),
    Reduction("var", lambda x, dim: torch.var(x, dim, unbiased=False), 100.0),
    Reduction("var_unbiased", lambda x, dim: torch.var(x), 100.0),
    Reduction("std", lambda x, dim: torch.std(x, dim), 100.0),
    Reduction("max", lambda x, dim: torch.max(x), 6e4),
    Reduction("min", lambda x, dim: torch.min(x), 6e4),
    Reduction("max_dim", lambda x, dim: torch.max(x, dim), 6e4),
    Reduction("min_dim", lambda x, dim: torch.min(x, dim, keepdim=True), 6e4),
    Reduction("argmax", lambda x, dim: torch.argmax(x, dim), 6e4),
    Reduction("argmin", lambda x, dim: torch.argmin(x, dim), 6e4),
    Reduction("softmax", lambda x, dim: torch.softmax(x, dim), 6e4),
    Reduction("log_softmax", lambda x, dim: torch.log_softmax(x, dim), 6e4),
    Reduction("safe_softmax", lambda x, dim: torch.ops.aten._safe_softmax(x, dim), 6e4),  # attention's softmax
    Reduction("cumsum", lambda x, dim: torch.cumsum(x, dim), 1e3),
    Reduction("linalg_vector_norm", lambda x, dim: torch.linalg.vector_norm(x, dim=dim), 50.0),
    Reduction("sort", lambda x, dim: torch.sort(x, dim=dim, stable=True), 6e4),  # stable: ties keep their order
    Reduction("topk", lambda x, dim: torch.topk(x, 3, dim).values, 6e4),  # values: tied indices may differ
    # float16: torch bins at (x - min) * bins / (max - min) in float16, so (max - min) * 7 must fit
    Reduction("histc", lambda x, dim: torch.histc(x, bins=7), 4e3),
)


@pytest.mark.parametrize("op", REDUCTIONS, ids=[op.name for op in REDUCTIONS])
@given(data=st.data())
def test_reduction(verify, op: Reduction, dtype: str, data) -> None:
    limit = op.half_limit if dtype == "float16" else None
    x = data.draw(tensors(REDUCED_SHAPES, low=-limit if limit else None, high=limit, grid=dtype), label="x")
    dim = data.draw(st.integers(-x.dim(), x.dim() - 1), label="dim")
    verdict = verify(lambda t: op.fn(t, dim), x, op=op.name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{op.name}:{dtype}")
