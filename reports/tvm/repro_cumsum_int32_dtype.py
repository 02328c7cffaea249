"""TVM's PyTorch front end keeps an int32 cumsum in int32: ``torch.cumsum(x, 0)`` of an int32 tensor
is int64 in torch (integer sums promote to int64, as ``sum`` does), int32 compiled by TVM.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported. Exits non-zero while the
deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class CumSum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 0)


x = torch.tensor([1, 2, 3, 2**30], dtype=torch.int32)
program = from_exported_program(torch.export.export(CumSum(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = torch.from_numpy(vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy())
expected = CumSum()(x)
print(f"torch {expected.dtype} {expected.tolist()}  tvm {got.dtype} {got.tolist()}")
assert got.dtype == expected.dtype and torch.equal(got, expected), "int32 cumsum differs on TVM"
