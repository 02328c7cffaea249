"""ExecuTorch 1.5.1, portable kernels (the ops the XNNPACK partitioner leaves behind): a floor
division by -0.0 loses the zero's sign, and add / sub with alpha overflow where torch does not.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds:

- torch.div(5.0, -0.0, rounding_mode="floor") is +inf (torch: -inf, as 5.0 / -0.0);
- torch.add(-3.4028235e38, 3.4028235e38, alpha=2) is inf (torch: 3.4028235e38: its CPU kernel
  computes a + alpha * b in one fused multiply-add, the portable kernel rounds alpha * b to inf
  first); torch.sub likewise.

Found by the op suite's special points (suites/ops/test_elementwise.py::test_special_points,
div_floor / add_alpha / sub_alpha on executorch:xnnpack: the op ran in the portable kernels).
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class Binary(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


def on_executorch(fn, a, b):
    program = to_edge_transform_and_lower(torch.export.export(Binary(fn), (a, b)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    return Runtime.get().load_program(program.buffer).load_method("forward").execute([a, b])[0]


big = torch.finfo(torch.float32).max
cases = {
    "div floor by -0.0": (lambda a, b: torch.div(a, b, rounding_mode="floor"), torch.tensor([5.0, 1.0]), torch.tensor([-0.0, 2.0])),
    "add alpha=2": (lambda a, b: torch.add(a, b, alpha=2), torch.tensor([-big, 1.0]), torch.tensor([big, 1.0])),
    "sub alpha=2": (lambda a, b: torch.sub(a, b, alpha=2), torch.tensor([big, 1.0]), torch.tensor([big, 1.0])),
}
wrong = []
for name, (fn, a, b) in cases.items():
    got, want = on_executorch(fn, a, b), fn(a, b)
    print(f"{name}: executorch {got.tolist()}, torch {want.tolist()}")
    if not torch.equal(got, want):
        wrong.append(name)
assert not wrong, f"ExecuTorch's portable kernels differ from torch: {wrong}"
