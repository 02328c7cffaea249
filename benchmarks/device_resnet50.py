"""torchvision ResNet-50 (seeded random weights, batch 1, 224x224, eval, no_grad) layer by
layer on the emulated MLU vs the native CPU forward, measured side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/device_resnet50.py [--repeats 15] [--core-version MLU270]
        [--matmul-precision int16] [--threads 1] [--accumulation-error]

Prints the median of each and their ratio (target: at most 2.0x), the output's rel_mse against
the CPU (target on MLU270: between 1e-6 and 3e-3) and the fallback ops seen. With
``--accumulation-error``, for each of the 53 convolutions run alone on the device (int8 / int16):
the RMS of its difference from the exact integer result (the quantized values' conv in float64,
exact below 2**53) over the RMS of the quantization error (exact integer result against the
float64 conv of the unquantized values), the figure docs/device.md requires below 1 %.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision

import mluverify.device as md
from mluverify.device import mlu_model, numerics


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--core-version", default=md.numerics.DEFAULT_CORE_VERSION)
    parser.add_argument("--matmul-precision", default=None, choices=numerics.MATMUL_PRECISIONS,
                        help="MLU270's conv / matmul precision (default: the device's, int16)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's); 1 is steadier on a busy machine")
    parser.add_argument("--accumulation-error", action="store_true",
                        help="also measure each conv's float32 accumulation error against its quantization error")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mlu_model.set_core_version(args.core_version)
    if args.matmul_precision:
        mlu_model.set_matmul_precision(args.matmul_precision)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    image = torch.randn(1, 3, 224, 224)
    mlu = torchvision.models.resnet50(weights=None).eval()
    mlu.load_state_dict(model.state_dict())
    mlu = mlu.to("mlu")
    image_mlu = image.to("mlu")
    with torch.no_grad():
        expected = model(image)
        with md.track_fallbacks() as fallbacks:
            got = mlu(image_mlu).cpu()
        cpu_times, mlu_times = [], []
        for _ in range(args.repeats):
            cpu_times.append(_timed(lambda: model(image)))
            mlu_times.append(_timed(lambda: mlu(image_mlu).cpu()))
    cpu, dev = statistics.median(cpu_times), statistics.median(mlu_times)
    rel = ((got.double() - expected.double()).norm() / expected.double().norm()).item()
    settings = numerics.active_settings()
    print(f"core version {settings.core_version}, matmul precision {settings.matmul_precision}, "
          f"torch threads {torch.get_num_threads()}, {args.repeats} paired runs")
    print(f"native CPU forward median  {cpu * 1e3:8.2f} ms")
    print(f"mlu layer-by-layer median  {dev * 1e3:8.2f} ms")
    print(f"ratio mlu / cpu            {dev / cpu:8.2f}x   (target <= 2.0x)")
    print(f"output rel_mse vs CPU {rel:.2e} (MLU270 target: 1e-6 .. 3e-3); "
          f"fallback ops: {dict(fallbacks.counts) or 'none'}")
    if args.accumulation_error and settings.qmax is not None:
        ratios = accumulation_error_ratios(model, image, settings)
        print(f"float32 accumulation error / quantization error over {len(ratios)} convs: "
              f"median {statistics.median(ratios):.2%}, max {max(ratios):.2%} (required < 1 %)")


def _quantized(x: torch.Tensor, qmax: int) -> tuple[torch.Tensor, float]:
    """The quantization rule written out (docs/device.md): float64 integer values and scale."""
    absmax = float(x.abs().max())
    scale = float(torch.tensor(qmax / absmax, dtype=torch.float32)) if absmax > 0 else 1.0
    return torch.round(x * scale).double(), scale


def accumulation_error_ratios(model: torch.nn.Module, image: torch.Tensor, settings) -> list[float]:
    """Per conv: RMS(device - exact integer result) / RMS(exact integer result - float64 conv)."""
    inputs = {}

    def keep_input(module, args, output) -> None:  # a hook returning a value would replace the output
        inputs[module] = args[0]

    hooks = [m.register_forward_hook(keep_input) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(image)
    for hook in hooks:
        hook.remove()
    ratios = []
    for conv, x in inputs.items():
        w = conv.weight.detach()
        qx, sx = _quantized(x, settings.qmax)
        qw, sw = _quantized(w, settings.qmax)
        denominator = float(torch.tensor(sx * sw, dtype=torch.float32))
        exact = conv._conv_forward(qx, qw, None) / denominator
        unquantized = conv._conv_forward(x.double(), w.double(), None)
        with torch.no_grad():
            device = conv._conv_forward(x.to("mlu"), w.to("mlu"), None).cpu().double()
        ratios.append(((device - exact).norm() / (exact - unquantized).norm()).item())
    return ratios


if __name__ == "__main__":
    main()
