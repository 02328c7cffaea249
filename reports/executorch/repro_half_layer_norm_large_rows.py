"""ExecuTorch 1.5.1's CPU ``native_layer_norm`` kernel (the XNNPACK partitioner leaves
``layer_norm`` to ExecuTorch's own kernels) is wrong in float16 and bfloat16 once the normalized
row holds 256 elements or more: a row of alternating -1 and +1 comes out near -318.5 / 313.5
in float16 (about 1 / sqrt(eps): the variance is lost) where torch gives -1 / +1; 255 elements
and fewer are right, float32 is right at every length. Found by the zoo in float16 on
executorch:xnnpack (docs/zoo.md): every transformer with a hidden size of 256 or more
(``beit_base_patch16_224``: rel_mse 1.0; CaiT and CoaT: NaN further on). Measured on an Intel
Xeon with AVX512-FP16; the threshold may follow the CPU's vector width.

Needs only torch and executorch. Exits non-zero while the deviation holds. Upstream: not found
reported (pytorch/executorch#16727, merged in January 2026, moved the norms' accumulation to
float32; this is another fault).
"""
import torch
from executorch_compiled import run


class LayerNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (x.shape[-1],))


wrong = []
for dtype in (torch.float32, torch.float16):
    for length in (255, 256, 512):
        x = torch.ones(1, length, dtype=dtype)
        x[0, ::2] = -1
        got, expected = run(LayerNorm(), x), LayerNorm()(x)
        print(f"{dtype} length {length}: executorch {got[0, :2].tolist()}, torch {expected[0, :2].tolist()}")
        if not torch.allclose(got.float(), expected.float(), atol=1e-2):
            wrong.append(f"{dtype} length {length}")
if wrong:
    raise SystemExit("layer_norm differs from torch's for " + ", ".join(wrong))
