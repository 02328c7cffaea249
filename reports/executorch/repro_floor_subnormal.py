"""ExecuTorch 1.5.1 + XNNPACK: subnormal float32 inputs are read as zero.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds, the
delegate computing with denormals treated as zero:

- floor(-1e-40) is -0.0 under XNNPACK where eager PyTorch (and IEEE 754) give -1.0, and
  ceil(1e-40) is 0.0 instead of 1.0;
- inf * 1e-40 is NaN (torch: inf: it is inf * 0) and 0 / 1e-40 is NaN (torch: 0: it is 0 / 0).
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class OnSubnormals(torch.nn.Module):
    def forward(self, x, a, b):
        return torch.floor(x), torch.ceil(x), a * b, a / b


x = torch.tensor([-1e-40, 1e-40, -0.5, 0.5])
a, b = torch.tensor([float("inf"), 0.0, 2.0]), torch.tensor([1e-40, 1e-40, 4.0])
program = to_edge_transform_and_lower(torch.export.export(OnSubnormals(), (x, a, b)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
got = Runtime.get().load_program(program.buffer).load_method("forward").execute([x, a, b])
want = OnSubnormals()(x, a, b)
wrong = []
for name, mine, eager in zip(("floor(x)", "ceil(x)", "a * b", "a / b"), got, want):
    print(f"{name}: executorch+xnnpack {mine.tolist()}, eager {eager.tolist()}")
    if not torch.equal(mine.isnan(), eager.isnan()) or not torch.allclose(mine, eager, equal_nan=True):
        wrong.append(name)
print("x:", x.tolist(), "a:", a.tolist(), "b:", b.tolist())
assert not wrong, f"XNNPACK reads subnormals as zero: {wrong} differ from torch"
