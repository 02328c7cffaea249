"""ExecuTorch 1.5.1's portable floor division (the XNNPACK partitioner leaves ``floor_divide``
to the portable kernels) gets the sign of a zero quotient of a zero dividend wrong: ``-0.0 // -0.3``
is -0.0 and ``-0.0 // 2.0`` is +0.0, where torch, Python and numpy give +0.0 and -0.0 (the sign
of the IEEE quotient ``a / b``); the zero takes the divisor's sign, as ``(a - fmod(a, b)) / b``
would give it. ``0.0 // -0.3`` and nonzero quotients are right. ``atan2``, a reciprocal or
``copysign`` turns the sign into -pi against 0, -inf against inf. The sixth fuzz campaign's
``7158e0341c6a`` (``floor_divide -> squeeze -> remainder -> atan2(v, v)``, docs/fuzzing.md); the
same kernel as the division by -0.0 in ``repro_portable_div_floor_alpha.py``, another case.

torch 2.14.1, executorch 1.5.1. Upstream: not found reported.
    .venv/bin/python reports/executorch/repro_floor_divide_zero_sign.py      # exits 1 while it holds
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class FloorDivide(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.floor_divide(a, b)


a, b = torch.tensor([-0.0, 0.0, -0.0, 0.5]), torch.tensor([-0.3, -0.3, 2.0, -0.3])
program = to_edge_transform_and_lower(torch.export.export(FloorDivide(), (a, b)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
got = Runtime.get().load_program(program.buffer).load_method("forward").execute([a, b])[0].clone()
want = FloorDivide()(a, b)
print(f"a // b for a = {a.tolist()}, b = {b.tolist()}\ntorch:     {want.tolist()}\nexecutorch: {got.tolist()}")
same = torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want))
assert same, "ExecuTorch's floor_divide differs from torch's (values or the signs of zeros)"
