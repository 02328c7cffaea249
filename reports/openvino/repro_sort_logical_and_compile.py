"""OpenVINO's CPU plugin cannot compile ``torch.sort`` followed by ``torch.logical_and`` of its
values: ``convert_model`` succeeds, ``compile_model`` raises ``While validating node 'opset11::TopK
sort/aten.sort.stable/TopK ...': Default output not supported``; the sort alone compiles and is
right. The sixth fuzz campaign's ``cea9d9ba606f`` (docs/fuzzing.md).

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_sort_logical_and_compile.py      # exits 1 while it fails
"""
import torch
from openvino_compiled import check


class SortLogicalAnd(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values = torch.sort(x, dim=0, stable=True)[0]
        return torch.logical_and(values, values)


check(SortLogicalAnd(), torch.tensor([3.0, 0.0, 2.0]))
