"""IREE computes an integer right shift by the dtype's width or more as garbage: torch defines
``x >> n`` for ``n`` at or past the width as the sign fill (0, or -1 for a negative ``x``; 0 for
uint8), but the lowering emits the shift as it is, and a shift by the width or more is poison in
MLIR's ``arith`` and in LLVM. Compiled by IREE for the generic CPU (as here), int8 ``x >> 8`` is 0
for negative ``x`` (torch: -1); for the host CPU (``--iree-llvmcpu-target-cpu=host``, as mluverify's
iree:cpu compiles) int16 ``zeros >> 64`` gives -1 in one of three elements and uint8 ``x >> 8``
gives ``x >> 7``: what comes out depends on the code generated. Shifts below the width are right. The sixth fuzz campaign's ``4abfb5a4bc08`` (``to_int -> shift_right``, docs/fuzzing.md).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found
reported (llvm/torch-mlir#4676, merged, fixed the signedness of these shifts, not their width).
    .venv/bin/python reports/iree/repro_shift_past_width.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import run


class ShiftRight(torch.nn.Module):
    def __init__(self, bits: int) -> None:
        super().__init__()
        self.bits = bits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x >> self.bits


def differing(cases: list) -> int:
    """How many of ``cases`` IREE computes otherwise than torch (the IREE buffers freed on return)."""
    wrong = 0
    for bits, x in cases:
        expected, got = x >> bits, run(ShiftRight(bits), x)
        print(f"{x.dtype} {x.tolist()} >> {bits}: torch {expected.tolist()}, iree {got.tolist()}")
        wrong += not torch.equal(expected, got)
    return wrong


values = torch.tensor([0, 5, -5, 100, -100, 0], dtype=torch.int8)
cases = [(8, values), (64, values), (3, values)]   # the last below the width: right
wrong = differing(cases)
assert not wrong, f"IREE's right shift differs from torch's in {wrong} of {len(cases)} cases"
