"""IREE (iree-base-compiler 3.13.0, llvm-cpu) cannot compile a bfloat16 program that holds a
bfloat16 constant: a module's parameters and buffers are constants of the exported program, so
every bfloat16 module (a convolution, a linear layer, a batch norm) fails to compile with
"'arith.constant' op failed to verify that all of {value, result} have same type". The same
program with the constant passed as an input compiles and computes the right result; float16
and float32 compile too.

Needs only torch and the iree extra (iree-base-compiler, iree-base-runtime, iree-turbine):
    .venv/bin/python reports/iree/repro_bf16_constant.py      # exits 1 while the bug is there
"""
import io
import sys

import iree.compiler
import torch
from iree.turbine import aot


class ScaledByConstant(torch.nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.5, -2.0, 0.25], dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def compile_error(dtype: torch.dtype) -> str:
    """iree-compile's first error line for the program in ``dtype``; "" when it compiles."""
    exported = aot.export(ScaledByConstant(dtype), args=(torch.ones(3, dtype=dtype),))
    bytecode = io.BytesIO()
    exported.mlir_module.write_bytecode(bytecode)
    try:
        iree.compiler.compile_str(bytecode.getvalue(), target_backends=["llvm-cpu"])
    except iree.compiler.CompilerToolError as exc:
        return next(line for line in str(exc).splitlines() if "error:" in line)
    return ""


assert compile_error(torch.float16) == "", "float16 should compile (the control)"
error = compile_error(torch.bfloat16)
print(f"bfloat16: {error or 'compiled'}")
sys.exit(1 if error else 0)
