"""Each convolution and linear layer of a zoo model run alone on ExecuTorch (as target
executorch:xnnpack lowers it) with its float16 eager input, against float64 on the same input,
beside torch's own float16 error (docs/zoo.md, "float16 on `executorch:xnnpack`"). Where every
layer's error is many times torch's and grows with the products it sums, the model's float16
departure is XNNPACK's float16 accumulation (``repro_half_gemm_accumulates_in_half.py``), layer
by layer. Needs the zoo and executorch extras.
    .venv/bin/python reports/executorch/zoo_half_layer_errors.py selecsls42b visformer_small
"""
import copy
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parents[2] / "suites"))
from executorch_compiled import run  # noqa: E402
from zoo.zoo_models import eager, in_float16, zoo_models  # noqa: E402

LAYERS = (torch.nn.Conv2d, torch.nn.Linear)


def relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected).norm() / expected.norm())


def layer_inputs(model: torch.nn.Module, inputs: tuple) -> dict[str, torch.Tensor]:
    """The first float16 input each layer of ``model`` sees in its eager run."""
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def hook(module, args, output) -> None:
            seen.setdefault(name, args[0].detach().clone())
        return hook

    handles = [module.register_forward_hook(keep(name))
               for name, module in model.named_modules() if isinstance(module, LAYERS)]
    with torch.no_grad():
        model(*inputs)
    for handle in handles:
        handle.remove()
    return seen


def layer_errors(name: str) -> list[tuple[str, int, float, float]]:
    """(layer, products summed per output, ExecuTorch's relative error, torch's), worst first."""
    model16, inputs16 = in_float16(*eager(zoo_models()[name]))
    rows = []
    with torch.no_grad():
        for layer_name, x in layer_inputs(model16, inputs16).items():
            layer = model16.get_submodule(layer_name)
            exact = copy.deepcopy(layer).double()(x.double())
            rows.append((layer_name, layer.weight[0].numel(), relative(run(layer, x), exact),
                         relative(layer(x), exact)))
    return sorted(rows, key=lambda row: -row[2])


if __name__ == "__main__":
    for model_name in sys.argv[1:] or ["selecsls42b"]:
        rows = layer_errors(model_name)
        for layer_name, products, executorch_error, torch_error in rows[:5]:
            print(f"{model_name} {layer_name}: {products} products, ExecuTorch {executorch_error:.2e}, "
                  f"torch {torch_error:.2e}")
        ratios = [executorch_error / torch_error for _, _, executorch_error, torch_error in rows]
        print(f"{model_name}: {len(rows)} layers, ExecuTorch / torch median {statistics.median(ratios):.1f}, "
              f"range {min(ratios):.1f}-{max(ratios):.1f}, worst ExecuTorch error {rows[0][2]:.2e}")
