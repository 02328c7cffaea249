"""OpenVINO's atan2 of two infinities is NaN: ``torch.atan2(inf, inf)`` is pi / 4 in torch (C's
atan2: ±pi / 4 and ±3 pi / 4 by the signs), NaN from OpenVINO's CPU plugin in both precisions
(the f32 hint, openvino:cpu, and the default, openvino:default). Zeros, ``atan2(1, 0)`` and
``atan2(1, -inf)`` are right. The sixth fuzz campaign's ``6200aeaa9565`` (docs/fuzzing.md).

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/openvino/repro_atan2_infinities.py      # exits 1 while the deviation is there
"""
import torch
from openvino_compiled import F32, run


class Atan2(torch.nn.Module):
    def forward(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.atan2(y, x)


inf = float("inf")
y, x = torch.tensor([inf, -inf, inf, -inf, 0.0, 1.0, 1.0]), torch.tensor([inf, inf, -inf, -inf, -0.0, 0.0, -inf])
expected = Atan2()(y, x)
print(f"torch:            {expected.tolist()}")
wrong = []
for name, config in (("openvino:cpu", F32), ("openvino:default", {})):
    got = run(Atan2(), y, x, config=config)
    print(f"{name + ':':17} {got.tolist()}")
    if not torch.equal(got.isnan(), expected.isnan()):
        wrong.append(name)
assert not wrong, f"OpenVINO's atan2 is NaN where torch's is not on {wrong}"
