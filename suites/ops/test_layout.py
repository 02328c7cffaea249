"""Layout and indexing: cat / stack / split / chunk / view / reshape / permute / transpose /
flatten / contiguous / expand / pad / roll / repeat / unfold, index_select / gather / embedding / index (results must be
exact copies of the input's values: any rounding or misplaced element shows), and the factories the models call
(zeros_like / full_like / eye / scalar_tensor: exact constants)."""
from __future__ import annotations

from typing import Callable

import hypothesis
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from mluverify.strategies import shapes, search_score, tensors

LAYOUT = (  # name, fn(x, dim) on one tensor with at least 2 dims
    ("cat", lambda x, d: torch.cat([x, x * 2.0, x[..., :1]], dim=-1)),
    ("stack", lambda x, d: torch.stack([x, -x], dim=d)),
    ("split", lambda x, d: torch.split(x, 2, dim=d)),
    ("chunk", lambda x, d: torch.chunk(x, 3, dim=d)),
    ("view", lambda x, d: x.contiguous().view(-1)),
    ("reshape", lambda x, d: x.reshape(x.shape[0], -1)),
    ("permute", lambda x, d: x.permute(*reversed(range(x.dim()))).contiguous()),
    ("transpose", lambda x, d: torch.transpose(x, 0, d) + 0.0),
    ("flatten", lambda x, d: torch.flatten(x, 1)),
    ("contiguous", lambda x, d: x.contiguous()),
    ("expand", lambda x, d: x[:1].expand(3, *x.shape[1:]) * 1.0),
    ("narrow_add", lambda x, d: x.narrow(d, 0, 1) + x),
    ("constant_pad_nd", lambda x, d: F.pad(x, (1, 2, 0, 1), value=0.5)),
    ("roll", lambda x, d: torch.roll(x, 2, d)),
    ("repeat", lambda x, d: x.repeat(2, *([1] * (x.dim() - 1)))),
    ("unfold", lambda x, d: x.unfold(d, min(2, x.shape[d]), 1).contiguous()),  # sliding windows (halo attention)
)


@pytest.mark.parametrize("name, fn", LAYOUT, ids=[name for name, _ in LAYOUT])
@given(data=st.data())
def test_layout(verify, name: str, fn: Callable, dtype: str, data) -> None:
    x = data.draw(tensors(shapes(min_dims=2), grid=dtype), label="x")
    dim = data.draw(st.integers(0, x.dim() - 1), label="dim")
    verdict = verify(lambda t: fn(t, dim), x, op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{name}:{dtype}")


INDEXING = (  # name, fn(x, index, dim); index values lie in [0, x.shape[dim])
    ("index_select", lambda x, i, d: torch.index_select(x, d, i.flatten())),
    ("gather", lambda x, i, d: torch.gather(x, d, i)),
    ("embedding", lambda x, i, d: F.embedding(i, x.flatten(1))),
    # x[..., i, ...]: a relative-position bias table read through an index tensor (BEiT, Swin)
    ("index", lambda x, i, d: x[(slice(None),) * d + (i.flatten()[: 2 * x.shape[d]],)]),
)


@pytest.mark.parametrize("name, fn", INDEXING, ids=[name for name, _ in INDEXING])
@given(data=st.data())
def test_indexing(verify, name: str, fn: Callable, dtype: str, data) -> None:
    x = data.draw(tensors(shapes(min_dims=2), grid=dtype), label="x")
    dim = 0 if name == "embedding" else data.draw(st.integers(0, x.dim() - 1), label="dim")
    seed = data.draw(st.integers(0, 2**16), label="index_seed")
    index = torch.randint(0, x.shape[dim], x.shape, generator=torch.Generator().manual_seed(seed))
    verdict = verify(lambda t, i: fn(t, i, dim), x, index, op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{name}:{dtype}")


FACTORIES = (  # name, the input's dtype, fn(x) making a constant tensor on x's device (the zoo's models)
    ("zeros_like", "int64", torch.zeros_like),  # T5's relative position buckets
    ("full_like", "int64", lambda x: torch.full_like(x, 7)),  # MPNet's relative position buckets
    ("eye", "float32", lambda x: torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)),  # XLNet
    ("scalar_tensor", "float32", lambda x: torch.scalar_tensor(-3.5, dtype=x.dtype, device=x.device)),  # masks
)


@pytest.mark.parametrize("name, factory_dtype, fn", FACTORIES, ids=[name for name, *_ in FACTORIES])
@given(data=st.data())
def test_factory(verify, name: str, factory_dtype: str, fn: Callable, data) -> None:
    x = data.draw(tensors(shapes(min_dims=2)), label="x").to(getattr(torch, factory_dtype))
    verify(fn, x, op=name, dtype=factory_dtype)  # judged exactly: constants
