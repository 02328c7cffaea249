"""``torch.sub(x, y, alpha=2)`` at the float32 limits: torch's CPU kernel computes ``x - 2 * y``
with one rounding (a fused multiply-add), so ``sub(3.4e38, 3.4e38, alpha=2)`` is the exact
-3.4028235e38; ONNX has no alpha and both exporters emit ``Mul(y, 2)`` then ``Sub``, whose
intermediate 6.8e38 overflows: -inf (and ``sub(inf, 3.4e38, alpha=2)`` is inf - inf = NaN where
torch gives inf). Finite operands whose exact result is representable come out infinite: a
float32 range deviation of the exporters' lowering, met only within a factor alpha of float32's
largest value (the suites' test_special_points sub_alpha on ort:cpu and ort:dynamo; TVM drops
alpha altogether, reports/tvm).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_sub_alpha_overflow.py      # exits 1 while the deviation is there
"""
import torch
from ort_compiled import check


class SubAlpha(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sub(x, y, alpha=2.0)


largest = torch.finfo(torch.float32).max
check(SubAlpha(), torch.tensor([largest, float("inf"), 1.0]), torch.tensor([largest, largest, 2.0]))
