"""TVM's ``aten.native_layer_norm`` returns its mean and rstd outputs in the input's shape
(1x2x3) instead of torch's (1x2x1: one statistic per normalized row), so a program that uses them
sees other values broadcast. ``native_group_norm`` likewise (OpInfo's sample: 1x6x3 for torch's 1x2).

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched for
native_layer_norm mean rstd shape in the Relax PyTorch front end). Exits non-zero while the
deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class NativeLayerNorm(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.native_layer_norm(x, [3], None, None, 1e-5)


x = torch.randn(1, 2, 3, generator=torch.Generator().manual_seed(0))
program = from_exported_program(torch.export.export(NativeLayerNorm(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = [torch.from_numpy(t.numpy()) for t in vm["main"](tvm.runtime.tensor(x.numpy()))]
expected = NativeLayerNorm()(x)
print("torch:", [tuple(t.shape) for t in expected], "tvm:", [tuple(t.shape) for t in got])
assert [t.shape for t in got] == [t.shape for t in expected], "native_layer_norm's mean / rstd shapes differ on TVM"
