"""IREE computes a float16 ``layer_norm`` in float16, its ``eps`` included: Hugging Face's default
``layer_norm_eps`` of 1e-12 is below float16's smallest subnormal (6e-8) and rounds to 0, so a
constant row (variance 0) is normalised by 1 / sqrt(0) and comes out NaN, where torch (which
computes a half-precision norm in float32) gives the bias. DeiT and BEiT in float16 meet it on
their class and distillation tokens, which their seeded weights leave all zeros: every logit of
the zoo's ``hf_deit`` and ``hf_beit`` is NaN on iree:cpu (docs/zoo.md, "float16 on `iree:cpu`").
The overflow of the same float16 statistics is ``repro_half_norm_overflow.py``. ExecuTorch's
CPU ``native_layer_norm`` kernel gives the same NaN (``reports/executorch/repro_half_layer_norm_eps_underflow.py``):
two real compilers share the deviation.

iree-base-compiler 3.13.0, iree-turbine 3.9.0, torch 2.14.1, llvm-cpu (a generic CPU and the
host's AVX512-FP16 alike). Upstream: not found reported.
    .venv/bin/python reports/iree/repro_half_layer_norm_eps_underflow.py      # exits 1 while the deviation is there
"""
import torch
from iree_compiled import check


class LayerNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (4,), eps=1e-12)


check(LayerNorm(), torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 2.0, -2.0]], dtype=torch.float16))
