"""IREE cannot compile Python's ``&`` of boolean tensors: ``torch.export`` keeps it as
``aten.__and__.Tensor``, which torch-mlir's TorchToLinalg does not lower (``torch.bitwise_and``,
``aten.bitwise_and.Tensor``, compiles and is right). With a 0-d ``True`` on the left, as here,
iree-compile for llvm-cpu names the constant first: ``failed to legalize operation
'torch.vtensor.literal' ... dense<true> : tensor<i1>``; two masks name the op: ``failed to
legalize operation 'torch.aten.__and__.Tensor'``. transformers' attention masks are built exactly
so (``masking_utils.and_masks``: ``q_idx.new_ones((), dtype=torch.bool) & mask(...)``), so the
Hugging Face models of the model zoo given an attention mask (suites/zoo, issue 39) fail to
compile on iree:cpu (``fail_to_run``).

iree-base-compiler 3.13, iree-turbine 3.9, torch 2.14.1. Upstream: reported with a fix under
review, llvm/torch-mlir#4749 ("[TorchToLinalg] Lower aten.__and__.Tensor with tensor
broadcasting", open; found compiling Gemma's attention mask, the same literal and op).
    .venv/bin/python reports/iree/repro_bool_and.py      # exits 1 while it fails
"""
import torch
from iree_compiled import check


class AndTrue(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_ones((), dtype=torch.bool) & (x > 0)


check(AndTrue(), torch.tensor([1.0, -1.0, 2.0]))
