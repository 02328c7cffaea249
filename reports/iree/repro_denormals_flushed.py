"""IREE's CPU code flushes float32 subnormals to zero, inputs and results: ``1e-40 + 1e-40`` is
2e-40 in torch and 0 compiled by IREE, so ``x > 0`` is False, ``sign(x)`` 0, ``log(x)`` -inf
(torch: -92.1) and ``rsqrt(x)`` inf (torch: 1e20) for a subnormal ``x``; the same on the
runtime's local-sync driver.

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_denormals_flushed.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class OnSubnormals(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x + x, (x > 0).float(), torch.sign(x), torch.log(x), torch.rsqrt(x)])


check(OnSubnormals(), torch.tensor([1e-40, 1e-45, 1.0]))
