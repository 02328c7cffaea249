"""OpenVINO's truncating division of an infinite quotient is int32's minimum:
``torch.div(-inf, 2.0, rounding_mode="trunc")`` is -inf in torch, -2147483648.0 from OpenVINO's
CPU plugin (the truncation goes through an int32 conversion). The sixth fuzz campaign's
``8729f68a8f74`` (openvino:default; docs/fuzzing.md).

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_div_trunc_infinity.py      # exits 1 while it holds
"""
import torch
from openvino_compiled import F32, run


class DivTrunc(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.div(a, b, rounding_mode="trunc")


a, b = torch.tensor([-float("inf"), float("inf"), 7.0, -7.5]), torch.tensor([2.0, -3.0, 2.0, 2.0])
expected = DivTrunc()(a, b)
print(f"torch:            {expected.tolist()}")
wrong = []
for name, config in (("openvino:cpu", F32), ("openvino:default", {})):
    got = run(DivTrunc(), a, b, config=config)
    print(f"{name + ':':17} {got.tolist()}")
    if not torch.equal(got, expected):
        wrong.append(name)
assert not wrong, f"OpenVINO's truncating division differs from torch's on {wrong}"
