"""IREE's clamp drops NaN: ``torch.clamp(nan, -0.5, 0.5)`` is NaN in torch and -0.5 compiled by
IREE (also ``hardtanh`` and ``relu6``, float32 and float16): the lowering's min / max pair
returns the bound instead of propagating the NaN. OpenVINO and TVM share the deviation
(docs/backends.md).

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu. Upstream: not found reported.
    .venv/bin/python reports/iree/repro_clamp_nan.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class Clamp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -0.5, 0.5)


check(Clamp(), torch.tensor([float("nan"), 1.0, -1.0]))
