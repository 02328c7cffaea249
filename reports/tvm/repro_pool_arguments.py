"""Two pooling arguments TVM's PyTorch front end gets wrong:

- ``avg_pool2d(..., divisor_override=2)`` divides by the window's size instead of 2: on a 2x2
  window of ones torch gives 2, TVM 1;
- ``max_pool2d(..., return_indices=True)`` returns its indices as float32 where torch returns int64.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched for
avg_pool divisor_override and max_pool return_indices dtype in the Relax PyTorch front end). Exits
non-zero while either deviation is there.
"""
import torch
import torch.nn.functional as F
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class Pools(torch.nn.Module):
    def forward(self, x):
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return F.avg_pool2d(x, 2, divisor_override=2), values, indices


x = torch.ones(1, 1, 2, 2)
program = from_exported_program(torch.export.export(Pools(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = [torch.from_numpy(t.numpy()) for t in vm["main"](tvm.runtime.tensor(x.numpy()))]
expected = Pools()(x)
for name, g, e in zip(("avg_pool2d divisor_override=2", "max_pool2d values", "max_pool2d indices"), got, expected):
    print(f"{name}: torch {e.dtype} {e.flatten().tolist()}  tvm {g.dtype} {g.flatten().tolist()}")
assert all(g.dtype == e.dtype and torch.equal(g, e) for g, e in zip(got, expected)), "pooling arguments differ on TVM"
