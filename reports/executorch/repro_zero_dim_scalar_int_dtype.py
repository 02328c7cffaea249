"""ExecuTorch 1.5.1 widens a 0-d integer tensor plus a Python int to int64: ``v + 2`` and
``v - 2`` of a 0-d int16 tensor are int16 in torch (a Python scalar does not take part in type
promotion against a tensor of the same category) and int64 from ExecuTorch (values right), as if
the scalar were an int64 0-d tensor. A 1-d int16 tensor, and a 0-d float16 one, keep their dtype.
Found by the seventh campaign's phase E as fuzz finding ``daff2fb9e239`` (``relu -> remainder``
by ``where(v > 0, v, v - 2)`` of a 0-d int16 tensor: int64 where torch gives int16,
docs/fuzzing.md).

torch 2.14.1, executorch 1.5.1. Upstream: not found reported.
    .venv/bin/python reports/executorch/repro_zero_dim_scalar_int_dtype.py      # exits 1 while it holds
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class AddScalar(torch.nn.Module):
    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return v + 2


v = torch.tensor(5, dtype=torch.int16)
program = to_edge_transform_and_lower(torch.export.export(AddScalar(), (v,)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
got = Runtime.get().load_program(program.buffer).load_method("forward").execute([v])[0].clone()
want = AddScalar()(v)
print(f"v + 2 for a 0-d int16 v = 5\ntorch:      {want!r}\nexecutorch: {got!r}")
assert got.dtype == want.dtype and torch.equal(got, want), "ExecuTorch's 0-d int16 + 2 differs from torch's"
