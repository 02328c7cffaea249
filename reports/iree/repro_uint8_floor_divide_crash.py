"""iree-compile crashes (SIGSEGV) on a uint8 floor division by a number: ``x // 2`` of a uint8
tensor first reports "unimplemented: for conversion to byte or char type dstOriginalDtype has to
be passed to convertScalarToDtype" and then dies with a stack dump; int16 compiles. Found by hand
while writing the iree:cpu plugin (the compiler runs as a subprocess there, so the case errors
and the run goes on).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_uint8_floor_divide_crash.py      # exits 1 while the bug is there
"""
import iree.compiler
import torch
from iree_compiled import compiled


class FloorDivide(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x // 2


compiled(FloorDivide(), (torch.tensor([200, 7], dtype=torch.int16),))  # the control compiles
try:
    compiled(FloorDivide(), (torch.tensor([200, 7], dtype=torch.uint8),))
except iree.compiler.CompilerToolError as exc:
    code = next((line for line in str(exc).splitlines() if line.startswith("Error code")), "")
    raise SystemExit(f"uint8: iree-compile failed ({code})") from None
