"""XNNPACK (ExecuTorch 1.5.1) computes float16 ``sin`` / ``cos`` of large arguments far outside
[-1, 1]: sin(65504) is 239.5 and cos(65504) -40.44 where torch (which computes float16 sin / cos
in float32 and rounds once) gives 0.9756 and -0.2205, and already cos(1000) is -0.827 (torch
0.5625); float32 is right at all three. Found by the op suite's float16 special points on
executorch:xnnpack (``suites/ops/test_elementwise.py`` ``test_special_points``, rel_mse 185 / 22);
measured on an Intel Xeon with AVX512-FP16, where XNNPACK runs its native float16 kernels (its
argument reduction seemingly in float16).

Needs only torch and executorch. Exits non-zero while the deviation holds. Upstream: not found
reported for float16; google-ai-edge/LiteRT#9020 (open) is XNNPACK's float32 cos outside [-1, 1]
at 1e10, google/XNNPACK#10399 sqrt(inf).
"""
import torch
from executorch_compiled import run


class Unary(torch.nn.Module):
    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


wrong = []
for dtype in (torch.float32, torch.float16):
    x = torch.tensor([1.0, 1000.0, 65504.0], dtype=dtype)
    for function in (torch.sin, torch.cos):
        module = Unary(function)
        got, expected = run(module, x), module(x)
        name = f"{function.__name__} {dtype}"
        print(f"{name} of {x.tolist()}: executorch {got.tolist()}, torch {expected.tolist()}")
        if not torch.allclose(got.float(), expected.float(), atol=2e-3):
            wrong.append(name)
if wrong:
    raise SystemExit("differs from torch's: " + ", ".join(wrong))
