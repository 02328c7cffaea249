"""TVM's ``F.interpolate(mode="nearest")`` differs from torch in two ways:

- to a size that is not an integer multiple (3x6 -> 7x4, 3x6 -> 2x5) it picks other source pixels:
  torch's "nearest" takes ``floor(i * in / out)``, TVM's lowering another rounding;
- in 3d (``upsample_nearest3d``) the batch and channel dimensions are dropped: a 1x1x2x2x2 input
  to size 2x3x2 comes back 2x3x2 instead of 1x1x2x3x2.

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched for
upsample nearest rounding / interpolate nearest 3d shape in the Relax PyTorch front end). Exits
non-zero while either deviation is there.
"""
import torch
import torch.nn.functional as F
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class Nearest(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, x):
        return F.interpolate(x, size=self.size, mode="nearest")


def on_tvm(module, x):
    program = from_exported_program(torch.export.export(module, (x,)))
    vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
    return torch.from_numpy(vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy())


wrong = []
for x, size in ((torch.arange(18.0).reshape(1, 1, 3, 6), (2, 5)), (torch.arange(8.0).reshape(1, 1, 2, 2, 2), (2, 3, 2))):
    got, expected = on_tvm(Nearest(size), x), Nearest(size)(x)
    print(f"{tuple(x.shape)} -> {size}: torch {tuple(expected.shape)} {expected.flatten().tolist()}\n"
          f"{' ' * len(str(tuple(x.shape)))}    tvm   {tuple(got.shape)} {got.flatten().tolist()}")
    wrong += [] if got.shape == expected.shape and torch.equal(got, expected) else [size]
assert not wrong, f"nearest upsampling to {wrong} differs on TVM"
