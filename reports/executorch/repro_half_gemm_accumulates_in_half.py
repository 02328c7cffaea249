"""XNNPACK (ExecuTorch 1.5.1) accumulates a float16 linear / convolution in float16 on a CPU with
AVX512-FP16, where torch's CPU kernels accumulate float16 products in float32: the sum of 4096
products 1 x 1 comes out 2048 (in float16 2048 + 1 is 2048) where torch gives 4096; up to 2048
terms both are exact. With random operands the error grows with the reduction length, to several
times torch's own float16 error (printed below: 7e-3 against 2e-4 at 2304 terms). It is the
likely mechanism of the zoo's float16 ``selecsls42b``, ``visformer_small`` and ``hf_mobilevit``
over the 2 % bound on executorch:xnnpack (docs/zoo.md): each convolution of ``selecsls42b`` and
``visformer_small`` alone is 2.5-36 times torch's float16 error, up to 0.74 %, this error's size
at a few thousand products, dozens of layers deep (``zoo_half_layer_errors.py``).

Measured on an Intel Xeon with AVX512-FP16 (XNNPACK picks its float16 kernels by the CPU's
features; not measured on a CPU without native float16 arithmetic). Needs only torch and
executorch. Exits non-zero while the deviation holds. Upstream: a design of XNNPACK's native
float16 kernels, not found reported for x86.
"""
import torch
from executorch_compiled import run


def linear(weight: torch.Tensor) -> torch.nn.Module:
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False).half()
    with torch.no_grad():
        layer.weight.copy_(weight)
    return layer


def relative_error(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact).norm() / exact.norm()).item()


wrong = []
for terms in (2048, 4096, 8192):
    x, layer = torch.ones(1, terms, dtype=torch.float16), linear(torch.ones(4, terms))
    got, expected = run(layer, x)[0, 0].item(), layer(x)[0, 0].item()
    print(f"sum of {terms} products 1 x 1: executorch {got}, torch {expected}")
    if got != expected:
        wrong.append(f"{terms} terms")

generator = torch.Generator().manual_seed(0)
for terms in (64, 576, 2304):
    x = torch.randn(8, terms, generator=generator).half()
    layer = linear(torch.randn(64, terms, generator=generator) / terms ** 0.5)
    exact = x.double() @ layer.weight.double().T
    print(f"random, {terms} terms: relative error executorch {relative_error(run(layer, x), exact):.2e}, "
          f"torch {relative_error(layer(x), exact):.2e}")
if wrong:
    raise SystemExit("float16 linear differs from torch's for " + ", ".join(wrong))
