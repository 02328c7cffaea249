"""IREE cannot compile a strided window op (convolution, max or average pooling; 1-d, 2-d, 3-d)
whose output has a side of one while its window leaves input rows (padding included) unread:
input side 4, kernel 3, stride 2 gives one window over rows 0-2 and row 3 unread.
iree-compile fails with "'linalg.generic' op inferred input/output operand #1 has shape's
dimension #0 to be 4, but found 3"; torch computes it. An output side of one that reads every row
(side 3, kernel 3, no ceil_mode) or a longer output that leaves a row unread (side 6, kernel 3,
stride 2: two windows) compiles (a scan of max_pool2d, sides 3-7, kernels 2-3, strides 1-3,
paddings 0-1: all 11 failures have an output side of one). A second geometry
with the same message: ceil_mode with kernel 1 and stride 1 (side 7: "to be 8, but found 7"; kernel
2 or stride 2 with ceil_mode compile). Found by make verify-real REAL_TARGETS=iree:cpu (test_pool's
max_pool3d, max_pool2d_indices, avg_pool2d_no_pad_count); repro_conv3d_stride.py is the same bug
in a 3-d convolution.

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found
reported (closed: iree-org/iree#18387, a conv2d shape error fixed in 2024).
    .venv/bin/python reports/iree/repro_window_output_side_one.py      # exits 1 while the bug is there
"""
import iree.compiler
import torch
import torch.nn.functional as F
from iree_compiled import compiled


class Window(torch.nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.name == "conv2d":
            return F.conv2d(x, torch.ones(3, 2, 3, 3), stride=2)
        if self.name == "ceil_mode":
            return F.max_pool2d(x, 1, 1, ceil_mode=True)
        return getattr(F, self.name)(x, 3, 2)


failed = []
for name, shape in [("max_pool1d", (1, 2, 4)), ("max_pool2d", (1, 2, 4, 4)), ("avg_pool2d", (1, 2, 4, 4)),
                    ("conv2d", (1, 2, 4, 4)), ("max_pool2d", (1, 2, 6, 6)), ("ceil_mode", (1, 2, 7, 7))]:
    x = torch.randn(shape)
    outcome = "compiles"
    try:
        compiled(Window(name), (x,))
    except iree.compiler.CompilerToolError as exc:
        outcome = "iree: " + next(line for line in str(exc).splitlines() if "error:" in line).split("error: ")[-1]
        failed.append(name)
    window = "kernel 1, stride 1, ceil_mode" if name == "ceil_mode" else "kernel 3, stride 2"
    print(f"{name} of {tuple(shape[2:])}, {window} (torch: output {tuple(Window(name)(x).shape[2:])}): {outcome}")
if failed:
    raise SystemExit(f"iree-compile refuses {', '.join(failed)}")
