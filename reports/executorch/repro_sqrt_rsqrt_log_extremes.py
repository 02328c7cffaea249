"""ExecuTorch 1.5.1 + XNNPACK: sqrt, rsqrt, log, sin and cos are wrong at the ends of float32's range.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds. The
delegated float32 programs return (torch, IEEE in brackets):

- sqrt(inf) = nan [inf] (reported: google/XNNPACK#10399, fix in google/XNNPACK#10407),
  sqrt(3.4028235e38) = 2.767e19 [1.845e19];
- rsqrt(0) = nan [inf], rsqrt(-0) = nan [-inf], rsqrt(3.4028235e38) = 8.13e-20 [5.42e-20];
- log(3.4028235e38) = inf [88.72];
- sin(3.4028235e38) = nan [-0.5219], cos(3.4028235e38) = nan [0.8530].

Found by the op suite's special points (suites/ops/test_elementwise.py::test_special_points).
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class Unary(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def on_xnnpack(fn, x):
    program = to_edge_transform_and_lower(torch.export.export(Unary(fn), (x,)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    return Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]


x = torch.tensor([0.0, -0.0, torch.finfo(torch.float32).max, float("inf"), 4.0])
wrong = []
for fn in (torch.sqrt, torch.rsqrt, torch.log, torch.sin, torch.cos):
    got, want = on_xnnpack(fn, x), fn(x)
    print(f"{fn.__name__}({x.tolist()}):\n  executorch+xnnpack {got.tolist()}\n  torch              {want.tolist()}")
    if not torch.allclose(got, want, rtol=1e-6, equal_nan=True):
        wrong.append(fn.__name__)
assert not wrong, f"XNNPACK differs from torch at float32's extremes: {wrong}"
