"""``torch.var(x)`` and ``torch.std(x)`` over the whole tensor (no ``dim``; torch's default
correction of 1, Bessel's): OpenVINO divides the sum of squared deviations by N, not N - 1, so it
returns the population variance: ``var([1., 2.])`` is 0.25 where torch gives 0.5. With a ``dim``
the correction is applied (the per-row variances agree). The OpInfo suite's first ``var`` sample
(a 5x5x5 tensor) passed within the 2 % bound at rel_mse 0.008 (= 1/125, the factor N / (N - 1)),
``std`` at 0.004; the op suite's ``var_unbiased`` (``torch.var(x)``) at 0.49 % and 1.56 % was the same factor.
Both precisions (the f32 hint and the default) give it.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported (openvinotoolkit/openvino#36417
reports corrections other than 0 or 1 refused on the torch.export path).
    .venv/bin/python reports/openvino/repro_var_full_reduction_correction.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import check


class VarAll(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.var(x), torch.std(x)])


check(VarAll(), torch.tensor([1.0, 2.0]))
