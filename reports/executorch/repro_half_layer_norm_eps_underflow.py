"""ExecuTorch 1.5.1's CPU ``native_layer_norm`` kernel (the XNNPACK partitioner leaves
``layer_norm`` to it) takes ``eps`` in the input's dtype: in float16, Hugging Face's default
``layer_norm_eps`` of 1e-12 rounds to 0, so a constant row (variance 0) comes out NaN where torch
(which computes a half-precision norm in float32) gives the bias. DeiT's and BEiT's all-zero class
tokens (their seeded weights) make every logit of the zoo's ``hf_deit`` and ``hf_beit`` NaN in
float16 on executorch:xnnpack, as on iree:cpu (``reports/iree/repro_half_layer_norm_eps_underflow.py``):
two real compilers, one deviation. The same kernel's loss of the variance on rows of 256 elements
or more is ``repro_half_layer_norm_large_rows.py``.

Needs only torch and executorch. Exits non-zero while the deviation holds. Upstream: not found
reported.
"""
import torch
from executorch_compiled import run


class LayerNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (4,), eps=1e-12)


x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, -1.0, 2.0, -2.0]], dtype=torch.float16)
got, expected = run(LayerNorm(), x), LayerNorm()(x)
print(f"executorch: {got.tolist()}\ntorch:      {expected.tolist()}")
if not torch.equal(got.isnan(), expected.isnan()):
    raise SystemExit("layer_norm of a constant float16 row is NaN: eps 1e-12 rounded to 0")
