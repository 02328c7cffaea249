"""Upsampling (nearest 1d / 2d / 3d, linear, bilinear with and without align_corners,
trilinear) to drawn scale factors and sizes."""
from __future__ import annotations

import hypothesis
import pytest
import torch.nn.functional as F
from hypothesis import given, strategies as st

from mluverify.strategies import shapes, search_score, tensors

UPSAMPLE = (  # name, spatial dims, interpolate mode, align_corners
    ("upsample_nearest1d", 1, "nearest", None),
    ("upsample_nearest2d", 2, "nearest", None),
    ("upsample_nearest3d", 3, "nearest", None),
    ("upsample_linear1d", 1, "linear", False),
    ("upsample_bilinear2d", 2, "bilinear", False),
    ("upsample_bilinear2d_align", 2, "bilinear", True),
    ("upsample_trilinear3d", 3, "trilinear", False),
)


@pytest.mark.parametrize("name, spatial, mode, align_corners", UPSAMPLE, ids=[u[0] for u in UPSAMPLE])
@given(data=st.data())
def test_upsample(verify, name: str, spatial: int, mode: str, align_corners: bool | None, dtype: str, data) -> None:
    x = data.draw(tensors(shapes(min_dims=2 + spatial, max_dims=2 + spatial, max_side=6), grid=dtype), label="x")
    size = data.draw(st.tuples(*(st.integers(1, 12) for _ in range(spatial))), label="size")
    verdict = verify(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=align_corners), x,
                     op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{name}:{dtype}")
