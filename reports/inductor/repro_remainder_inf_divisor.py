"""TorchInductor (CPU) computes ``torch.remainder(a, b)`` by an infinite divisor as NaN: eager
follows Python's ``%`` (``1.0 % inf`` is 1.0, ``-1.0 % inf`` is inf), the compiled kernel
``a - floor(a / b) * b`` makes ``0 * inf``. The sixth fuzz campaign's ``65b0deb66407``
(docs/fuzzing.md); the same lowering as the third campaign's ``183908d5a8d3``.

torch 2.14.1 only. Upstream: pytorch/pytorch#198057 (open).
    .venv/bin/python reports/inductor/repro_remainder_inf_divisor.py      # exits 1 while it holds
"""
import torch

inf = float("inf")
a = torch.tensor([1.0, -1.0, 0.5, 2.0, 5.5, 7.0, 1.0, 3.0])
b = torch.tensor([inf, inf, -inf, 3.0, inf, 0.7, -inf, 2.0])
eager = torch.remainder(a, b)
compiled = torch.compile(lambda x, y: torch.remainder(x, y), backend="inductor", dynamic=False)(a, b)
print(f"eager:    {eager.tolist()}\ncompiled: {compiled.tolist()}")
same = torch.equal(eager.isnan(), compiled.isnan()) and torch.equal(eager.nan_to_num(), compiled.nan_to_num())
assert same, "Inductor's remainder differs from eager's"
