"""IREE computes a float16 layer_norm / group_norm's statistics in float16: with values of a few
hundred the squares overflow float16's 65504, the variance is inf and every output 0, where
torch (which accumulates a half-precision norm in float32) normalizes them
(``layer_norm([300, -300, 100, -100])`` is about [1.34, -1.34, 0.45, -0.45]).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_half_norm_overflow.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import run


class LayerNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (4,))


x = torch.tensor([300.0, -300.0, 100.0, -100.0], dtype=torch.float16)
expected, got = LayerNorm()(x), run(LayerNorm(), x)
print(f"torch: {expected.tolist()}\niree:  {got.tolist()}")
assert torch.allclose(got.float(), expected.float(), atol=1e-2), "IREE's float16 layer_norm overflows"
