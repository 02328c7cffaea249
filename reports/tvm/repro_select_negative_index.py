"""TVM's PyTorch front end lowers ``aten.select.int`` with a negative index (``x[:, -1]``) to
``R.take(x, -1, mode="fast")``, which does not wrap the index: the kernel reads outside the
tensor (garbage or another row) instead of the last element along the axis.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched
for select / take with a negative index). Exits non-zero while the deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class LastStep(torch.nn.Module):
    def forward(self, x):
        return x[:, -1]


x = torch.arange(30.0).reshape(2, 5, 3)
program = from_exported_program(torch.export.export(LastStep(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = torch.from_numpy(vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy())
print("torch:", x[:, -1].tolist(), "\ntvm:  ", got.tolist())
assert torch.equal(got, x[:, -1]), "x[:, -1] on TVM is not the last step"
