"""TVM's PyTorch front end cannot import ``torch.cat`` of torch's legacy empty tensor (shape
``[0]``) with a 4-d tensor: ``from_exported_program`` raises ``ValueError: Concat expects all
input tensors to have same ndim. However, the input contains tensors with ndim 1 and 4``. torch
skips 1-d empty inputs of ``cat`` (its legacy rule, pytorch/pytorch#5889), and transformers'
``DynamicCache`` starts each layer's keys and values as ``torch.tensor([])`` and concatenates the
first step onto them, so the Hugging Face decoders and encoder-decoders of the model zoo
(suites/zoo, issue 39) fail to import on tvm:cpu (``fail_to_run``), as on OpenVINO
(reports/openvino/repro_cat_legacy_empty.py).

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported. Exits non-zero while it fails.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class CatOntoEmptyCache(torch.nn.Module):
    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        cache = torch.tensor([], dtype=keys.dtype)  # DynamicLayer's first keys
        return torch.cat([cache, keys], dim=-2)


keys = torch.randn(2, 4, 3, 16)
program = from_exported_program(torch.export.export(CatOntoEmptyCache(), (keys,)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = torch.from_numpy(vm["main"](tvm.runtime.tensor(keys.numpy()))[0].numpy())
assert torch.equal(got, CatOntoEmptyCache()(keys)), "TVM's cat differs from torch's"
