"""TVM's PyTorch front end cannot import ``F.unfold`` (im2col): torch.export decomposes it into
advanced indexing whose index tensors broadcast against each other (numpy's rule, which torch
follows), and ``from_exported_program`` raises ``ValueError: index_tensor: cannot broadcast index
shapes. Mismatch at axis 0`` (for any batch size: 1 and 2 tried). ConvBERT's span-based dynamic
convolution unfolds its (batch, heads x head size, tokens, 1) values this way: hf_convbert of the
model zoo (suites/zoo, issue 39) fails to import on tvm:cpu (``fail_to_run``).

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported for ``index_tensor`` (the same
broadcast was fixed for the write, ``index_put``, in apache/tvm#18533). Exits non-zero while it
fails or differs.
"""
import torch
import torch.nn.functional as F
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class Unfold(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.unfold(x, kernel_size=[9, 1], padding=[4, 0])  # ConvBERT's, conv_kernel_size 9


x = torch.randn(2, 32, 12, 1)
program = from_exported_program(torch.export.export(Unfold(), (x,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = torch.from_numpy(vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy())
assert torch.equal(got, Unfold()(x)), "TVM's unfold differs from torch's"
