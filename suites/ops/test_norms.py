"""Normalisations: batch_norm (eval, running statistics), layer_norm, group_norm, with and
without affine parameters (float16 computes in float32 on the device); weight normalisation
(``torch._weight_norm``, wav2vec2's positional convolution)."""
from __future__ import annotations

from typing import Callable, NamedTuple

import hypothesis
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from mluverify.strategies import shapes, search_score, tensors


def _groups(x: torch.Tensor) -> int:
    return next(g for g in (3, 2, 1) if x.shape[1] % g == 0)


class Norm(NamedTuple):
    name: str
    min_dims: int
    fn: Callable  # fn(x, *stats, *affine)
    stats: bool  # takes running mean and var (per channel)
    affine_size: Callable[[torch.Tensor], int]  # length of weight / bias


NORMS = (
    Norm("batch_norm", 2, lambda x, mean, var, *wb: F.batch_norm(x, mean, var, *wb, training=False, eps=1e-5),
         True, lambda x: x.shape[1]),
    Norm("layer_norm", 1, lambda x, *wb: F.layer_norm(x, x.shape[-1:], *wb, eps=1e-5), False, lambda x: x.shape[-1]),
    Norm("group_norm", 2, lambda x, *wb: F.group_norm(x, _groups(x), *wb, eps=1e-5), False, lambda x: x.shape[1]),
)


def _vector(data, size: int, grid: str, low: float | None = None, high: float | None = None) -> torch.Tensor:
    return data.draw(tensors((size,), distributions=("normal",), low=low, high=high, grid=grid))


def _params(data, op: Norm, x: torch.Tensor, affine: bool, grid: str) -> list[torch.Tensor]:
    """Running statistics (when the op takes them), then weight and bias (when affine)."""
    params = []
    if op.stats:
        params += [_vector(data, x.shape[1], grid), _vector(data, x.shape[1], grid, low=0.1, high=4.0)]
    if affine:
        params += [_vector(data, op.affine_size(x), grid), _vector(data, op.affine_size(x), grid)]
    return params


@pytest.mark.parametrize("affine", (True, False), ids=("affine", "plain"))
@pytest.mark.parametrize("op", NORMS, ids=[op.name for op in NORMS])
@given(data=st.data())
def test_norm(verify, op: Norm, affine: bool, dtype: str, data) -> None:
    x = data.draw(tensors(shapes(min_dims=op.min_dims, min_side=2), low=-1e3, high=1e3, grid=dtype), label="x")
    verdict = verify(op.fn, x, *_params(data, op, x, affine, dtype), op=op.name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{op.name}:{dtype}")


@given(data=st.data())
def test_weight_norm(verify, dtype: str, data) -> None:
    v = data.draw(tensors(shapes(min_dims=2, min_side=2), low=-1e2, high=1e2, grid=dtype), label="v")
    dim = data.draw(st.integers(0, v.dim() - 1), label="dim")
    hypothesis.assume(bool(v.movedim(dim, 0).flatten(1).ne(0).any(1).all()))  # a zero slice has no direction
    g = _vector(data, v.shape[dim], dtype).reshape([-1 if i == dim else 1 for i in range(v.dim())])
    verdict = verify(lambda v, g: torch._weight_norm(v, g, dim), v, g, op="weight_norm_interface", dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:weight_norm:{dtype}")


def _rows(width: int, rows: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(seed))


# The drawn shapes stop at 9 a side; the zoo's transformers normalize rows of 192 to 768.
# ExecuTorch's float16 kernel loses the variance from 256 elements a row on (255 is right).
@pytest.mark.parametrize("width", (255, 256, 768))
def test_layer_norm_wide_rows(verify, width: int, dtype: str) -> None:
    x, (weight, bias) = _rows(width), _rows(width, rows=2, seed=1)
    verify(lambda x, w, b: F.layer_norm(x, (width,), w, b, eps=1e-5), x, weight, bias,
           op="layer_norm", dtype=dtype)


# BERT's and DeiT's eps of 1e-12 is below float16's smallest subnormal (6e-8): a back end that
# holds eps in float16 divides a constant row (DeiT's class token at seeded weights) 0 / 0.
def test_layer_norm_constant_row_tiny_eps(verify, dtype: str) -> None:
    x = torch.cat([torch.zeros(1, 32), _rows(32, 3)])
    verify(lambda x: F.layer_norm(x, (32,), eps=1e-12), x, op="layer_norm", dtype=dtype)
