"""TVM sums a float16 ``avg_pool2d`` window in float16 before dividing: a 2x2 window of 20000s
(sum 80000, above float16's 65504) gives inf where torch gives 20000 (its CPU kernel accumulates a
half-precision window in float32). ``avg_pool3d``, ``mean`` and ``var`` do the same: the mean of
four 20000s is inf.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched
for float16 avg_pool overflow / accumulation). Exits non-zero while the deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class AvgPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool2d(x, 2), x.mean()


x = torch.full((1, 1, 2, 2), 20000.0, dtype=torch.float16)
program = from_exported_program(torch.export.export(AvgPool(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = [torch.from_numpy(t.numpy()) for t in vm["main"](tvm.runtime.tensor(x.numpy()))]
print("torch (avg_pool2d, mean):", [t.flatten().tolist() for t in AvgPool()(x)],
      "\ntvm   (avg_pool2d, mean):", [t.flatten().tolist() for t in got])
assert all(torch.isfinite(t).all() for t in got), "float16 avg_pool2d / mean overflow on TVM"
