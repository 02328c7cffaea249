"""TVM's PyTorch front end drops the ``alpha`` of ``aten.add`` / ``aten.sub``:
``torch.add(x, y, alpha=3)`` computes ``x + y`` and ``torch.sub(x, y, alpha=3)`` ``x - y``.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched
for add / sub alpha in the Relax PyTorch front end). Exits non-zero while the deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class AddSubAlpha(torch.nn.Module):
    def forward(self, x, y):
        return torch.add(x, y, alpha=3), torch.sub(x, y, alpha=3)


x, y = torch.ones(3), torch.full((3,), 2.0)
program = from_exported_program(torch.export.export(AddSubAlpha(), (x, y)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = [torch.from_numpy(t.numpy()) for t in vm["main"](tvm.runtime.tensor(x.numpy()), tvm.runtime.tensor(y.numpy()))]
expected = AddSubAlpha()(x, y)
print("torch:", [t.tolist() for t in expected], "\ntvm:  ", [t.tolist() for t in got])
assert all(torch.equal(g, e) for g, e in zip(got, expected)), "alpha of add / sub ignored by TVM"
