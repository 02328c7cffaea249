"""Pooling: max / avg pooling in 1d / 2d / 3d with drawn kernel, stride, padding and
ceil_mode; adaptive avg / max pooling to drawn output sizes."""
from __future__ import annotations

from typing import Callable, NamedTuple

import hypothesis
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from mluverify.strategies import shapes, search_score, tensors


class Pool(NamedTuple):
    name: str
    spatial: int  # spatial dims after (N, C)
    fn: Callable  # fn(x, kernel, stride, padding, ceil_mode)
    # Average pools draw windows of 4 or more elements: the device's four cores add fewer in
    # the CPU's own order (docs/device.md, "Reductions"), so such a case would measure nothing.
    min_kernel: int = 1


POOLS = (
    Pool("max_pool1d", 1, lambda x, k, s, p, c: F.max_pool1d(x, k, s, p, ceil_mode=c)),
    Pool("max_pool2d", 2, lambda x, k, s, p, c: F.max_pool2d(x, k, s, p, ceil_mode=c)),
    Pool("max_pool3d", 3, lambda x, k, s, p, c: F.max_pool3d(x, k, s, p, ceil_mode=c)),
    Pool("max_pool2d_indices", 2, lambda x, k, s, p, c: F.max_pool2d(x, k, s, p, ceil_mode=c, return_indices=True)),
    Pool("avg_pool1d", 1, lambda x, k, s, p, c: F.avg_pool1d(x, k, s, p, ceil_mode=c), 4),
    Pool("avg_pool2d", 2, lambda x, k, s, p, c: F.avg_pool2d(x, k, s, p, ceil_mode=c), 2),
    Pool("avg_pool2d_no_pad_count", 2,
         lambda x, k, s, p, c: F.avg_pool2d(x, k, s, p, ceil_mode=c, count_include_pad=False), 2),
    Pool("avg_pool3d", 3, lambda x, k, s, p, c: F.avg_pool3d(x, k, s, p, ceil_mode=c), 2),
)

ADAPTIVE = (
    ("adaptive_avg_pool2d", F.adaptive_avg_pool2d),
    ("adaptive_max_pool2d", F.adaptive_max_pool2d),
)


def _input(data, spatial: int, grid: str, min_side: int = 2) -> torch.Tensor:
    shape = data.draw(shapes(min_dims=2 + spatial, max_dims=2 + spatial, min_side=max(2, min_side),
                             max_side=9 if spatial < 3 else 6), label="shape")
    return data.draw(tensors(shape, grid=grid), label="x")


@pytest.mark.parametrize("op", POOLS, ids=[op.name for op in POOLS])
@given(data=st.data())
def test_pool(verify, op: Pool, dtype: str, data) -> None:
    x = _input(data, op.spatial, dtype, op.min_kernel)
    kernel = data.draw(st.integers(op.min_kernel, min(x.shape[2:])), label="kernel")
    stride = data.draw(st.integers(1, 3), label="stride")
    padding = data.draw(st.integers(0, kernel // 2), label="padding")
    ceil_mode = data.draw(st.booleans(), label="ceil_mode")
    verdict = verify(lambda t: op.fn(t, kernel, stride, padding, ceil_mode), x, op=op.name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{op.name}:{dtype}")


@pytest.mark.parametrize("name, fn", ADAPTIVE, ids=[name for name, _ in ADAPTIVE])
@given(data=st.data())
def test_adaptive_pool(verify, name: str, fn: Callable, dtype: str, data) -> None:
    x = _input(data, 2, dtype)
    output_size = data.draw(st.tuples(st.integers(1, 5), st.integers(1, 5)), label="output_size")
    verdict = verify(lambda t: fn(t, output_size), x, op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{name}:{dtype}")
