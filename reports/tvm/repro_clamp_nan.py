"""TVM drops NaN in relu, relu6, hardtanh and clamp: ``relu(nan)`` is 0, ``relu6(nan)`` 6,
``hardtanh(nan)`` 1 and ``clamp(nan, -2, 2)`` 2 compiled for llvm, where torch gives NaN
(float32 and float16 alike).

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: apache/tvm#19579 (open, "maximum/minimum/relu/clip
do not propagate NaN": T.max / T.min become x86 maxps / minps, which return the second operand
when the first is NaN). Exits non-zero while the deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class Clamps(torch.nn.Module):
    def forward(self, x):
        return (torch.relu(x), torch.nn.functional.relu6(x), torch.nn.functional.hardtanh(x),
                torch.clamp(x, -2.0, 2.0))


x = torch.tensor([float("nan"), -1.0, 0.5, 7.0])
program = from_exported_program(torch.export.export(Clamps(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = [torch.from_numpy(t.numpy()) for t in vm["main"](tvm.runtime.tensor(x.numpy()))]
expected = Clamps()(x)
for name, g, e in zip(("relu", "relu6", "hardtanh", "clamp"), got, expected):
    print(f"{name}: torch {e.tolist()} tvm {g.tolist()}")
assert all(torch.allclose(g, e, equal_nan=True) for g, e in zip(got, expected)), "NaN not propagated by TVM"
