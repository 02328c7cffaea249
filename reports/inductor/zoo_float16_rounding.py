"""How far float16 alone takes a zoo model from its float32 run (docs/zoo.md, "float16 on
`cpu:inductor`"): for each model, rel_mse against torch's float32 CPU run (the judge's metric: the
square root of the ratio of squared sums) of
  - its weights and inputs rounded to float16, computed in float32 (what no float16 arithmetic adds),
  - torch's own float16 eager run on the CPU,
  - TorchInductor's float16 compile of it (as target cpu:inductor compiles),
and whether that compile equals torch's float16 eager run bit for bit, with the kernels it
generated (a compiled float16 run can equal eager's and still have compiled: ``selecsls42b``).
A compiler whose float16 figure lies between the first two computes float16 more precisely than
torch does: a model over the bound then fails by float16's range, not by the compiler. Needs the
zoo extra.
    .venv/bin/python reports/inductor/zoo_float16_rounding.py hf_mobilevit
"""
import copy
import sys
from pathlib import Path

import torch
from torch._inductor import metrics

sys.path.insert(0, str(Path(__file__).parents[2] / "suites"))
from zoo.zoo_models import eager, in_float16, zoo_models  # noqa: E402


def relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.double(), expected.double()
    return float((((actual - expected) ** 2).sum() / (expected ** 2).sum()).sqrt())


def figures(name: str) -> dict[str, object]:
    model, inputs = eager(zoo_models()[name])
    with torch.no_grad():
        reference = model(*inputs)[0]
        model16, inputs16 = in_float16(model, inputs)
        eager16 = model16(*inputs16)[0]
        metrics.reset()
        compiled16 = torch.compile(model16, backend="inductor", dynamic=False)(*inputs16)[0]
        rounded_model = copy.deepcopy(model16).float()  # float16's values, float32's arithmetic
        rounded = rounded_model(*(x.float() if x.is_floating_point() else x for x in inputs16))[0]
    return {"float16 weights and inputs, float32 arithmetic": relative(rounded, reference),
            "torch's float16 eager run": relative(eager16, reference),
            "TorchInductor float16": relative(compiled16, reference),
            "TorchInductor float16 equals eager bit for bit": torch.equal(compiled16, eager16),
            "kernels TorchInductor generated": metrics.generated_kernel_count}


if __name__ == "__main__":
    for model_name in sys.argv[1:] or ["hf_mobilevit"]:
        for what, value in figures(model_name).items():
            print(f"{model_name}: {what}: " + (f"rel_mse {value:.4g}" if isinstance(value, float) else f"{value}"))
