"""Level-1 statistics and capture recipes, by the one-pass kernel and by torch's reductions, against
numpy float64 references: signs, NaN / +Inf / -Inf, half precisions, transposed and strided views."""
import math

import numpy as np
import pytest
import torch

from mluverify.dump import _capture, _fused, _summary


def reference_stats(tensor):
    """(min, max, mean, abs_sum, nan, inf) over all values, NaN and infinities propagating."""
    values = tensor.double().numpy().reshape(-1)
    nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
    if nan:
        return math.nan, math.nan, math.nan, math.nan, nan, inf
    with np.errstate(invalid="ignore"):
        return (values.min(), values.max(), values.sum() / values.size, np.abs(values).sum(), 0,
                inf)


def reference_recipe(tensor):
    values = tensor.double().numpy().reshape(-1)
    finite = values[np.isfinite(values)]
    return dict(min=finite.min(), max=finite.max(), mean=finite.mean(), std=finite.std(),
                nan_share=np.isnan(values).mean(), posinf_share=(values == np.inf).mean(),
                neginf_share=(values == -np.inf).mean())


def tensors():
    torch.manual_seed(0)
    mixed = torch.randn(70_000) * 3 - 1  # spans several of the kernel's chunks
    positive = torch.rand(1000)
    with_inf = mixed.clone()
    with_inf[[3, 40_000]] = math.inf
    with_inf[100] = -math.inf
    both_inf = torch.tensor([1.0, math.inf, -math.inf])
    with_nan = mixed.clone()
    with_nan[[7, 50_001]] = math.nan
    return {"mixed": mixed, "positive": positive, "with_inf": with_inf, "both_inf": both_inf,
            "with_nan": with_nan, "half": (mixed / 8).half(), "bfloat16": mixed.bfloat16(),
            "float64": mixed.double(), "transposed": torch.randn(300, 64).t(),
            "strided": torch.randn(100, 100)[:, ::3]}


@pytest.fixture(params=["fused kernel", "torch reductions"])
def path(request, monkeypatch):
    if request.param == "fused kernel":
        assert _fused.kernel_available(), "the kernel builds on this machine"
    else:
        monkeypatch.setattr(_summary, "fused_stats", lambda tensor: None)
        monkeypatch.setattr(_capture, "fused_stats", lambda tensor: None)
    return request.param


@pytest.mark.parametrize("name", list(tensors()))
def test_level_1_statistics(path, name):
    tensor = tensors()[name]
    got, expected = _summary._stats(tensor), reference_stats(tensor)
    assert got[4:] == expected[4:]  # NaN and Inf counts exactly
    assert got[:4] == pytest.approx(expected[:4], rel=1e-5, abs=1e-9, nan_ok=True)


@pytest.mark.parametrize("name", [n for n in tensors() if n != "both_inf"])
def test_capture_recipes(path, name):
    tensor = tensors()[name]
    got, expected = _capture.recipe(tensor), reference_recipe(tensor)
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_integer_recipe_and_an_all_nan_tensor(path):
    assert _capture.recipe(torch.tensor([1, 2, 3, 6])) == pytest.approx(
        dict(min=1, max=6, mean=3, std=math.sqrt(3.5), nan_share=0, posinf_share=0,
             neginf_share=0))
    nothing = _capture.recipe(torch.full((4,), math.nan))
    assert nothing["nan_share"] == 1 and math.isnan(nothing["mean"])
