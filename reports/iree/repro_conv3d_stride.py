"""IREE cannot compile a strided 3-d convolution whose output has a side of one (input
2x6x6x4x6, kernel 3, stride 2: output sides 2x1x2), float32 or float16: iree-compile fails with
"'linalg.generic' op inferred input/output operand #1 has shape's dimension #3 to be 4, but found
3"; torch computes it.

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_conv3d_stride.py      # exits 1 while the bug is there
"""
import iree.compiler
import torch
from iree_compiled import compiled


class Conv3d(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv3d(x, w, stride=2)


args = (torch.randn(2, 6, 6, 4, 6), torch.randn(4, 6, 3, 3, 3))
print("torch: output shape", tuple(Conv3d()(*args).shape))
try:
    compiled(Conv3d(), args)
except iree.compiler.CompilerToolError as exc:
    raise SystemExit("iree: " + next(line for line in str(exc).splitlines() if "error:" in line)) from None
