"""Quantized networks on the emulated MLU, side by side with native CPU float32 in one run.

1. Time: int8 ResNet50 forward on ``mlu``, batch 1, against the float32 CPU forward (target:
   at most 3x). Medians of alternating runs.
2. Accuracy: rel_mse of int8 and int16 ResNet50 and VGG19 outputs against the float CPU model
   (torchvision, random weights seeded 0, calibrated on random images, judged on another one),
   int8 per tensor and per channel, int16 per tensor.

Run: PYTHONPATH=. .venv/bin/python benchmarks/quant_resnet50.py [--repeats 5] [--calibration 2]
     [--skip-vgg]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision

import mluverify.device  # noqa: F401  (registers the "mlu" device)
from mluverify.judge import metrics
from mluverify.device.quantization import quantize_for_target

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def random_images(count: int, seed: int) -> list[torch.Tensor]:
    """Uniform random pixels, normalised as torchvision's ImageNet models expect."""
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(1, 3, 224, 224, generator=generator) - MEAN) / STD for _ in range(count)]


def network(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def paired_medians(first, second, repeats: int) -> tuple[float, float]:
    """Median seconds of ``first`` and ``second``, run alternately after one warm-up each."""
    first(), second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, bucket in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def time_resnet50(repeats: int, calibration: int) -> None:
    net = network("resnet50")
    image = random_images(1, seed=1)[0]
    quantized = quantize_for_target(net, random_images(calibration, seed=2), dtype="int8").to("mlu")
    image_mlu = image.to("mlu")
    cpu_s, mlu_s = paired_medians(lambda: net(image), lambda: quantized(image_mlu).cpu(), repeats)
    print(f"ResNet50 batch 1, float32 CPU:  {cpu_s * 1e3:9.1f} ms")
    print(f"ResNet50 batch 1, int8 on mlu:  {mlu_s * 1e3:9.1f} ms")
    print(f"ratio mlu int8 / CPU float32:   {mlu_s / cpu_s:9.2f}x (target <= 3x)")


def accuracy(name: str, dtype: str, per_channel: bool, calibration: int) -> dict[str, float]:
    net = network(name)
    quantized = quantize_for_target(net, random_images(calibration, seed=2), dtype=dtype,
                                    per_channel=per_channel).to("mlu")
    image = random_images(1, seed=1)[0]
    return metrics(quantized(image.to("mlu")).cpu(), net(image))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calibration", type=int, default=2, help="calibration images")
    parser.add_argument("--skip-vgg", action="store_true", help="only ResNet50 (VGG19 int16 is slow)")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{args.calibration} calibration images")
    time_resnet50(args.repeats, args.calibration)
    print(f"{'network':10} {'weights':18} {'rel_mse':>9} {'sqnr_db':>8} {'cosine':>9}")
    for name in ("resnet50",) if args.skip_vgg else ("resnet50", "vgg19"):
        for dtype, per_channel in (("int8", False), ("int8", True), ("int16", False)):
            scores = accuracy(name, dtype, per_channel, args.calibration)
            weights = f"{dtype} per-{'channel' if per_channel else 'tensor'}"
            print(f"{name:10} {weights:18} {scores['rel_mse']:9.5f} {scores['sqnr_db']:8.2f} "
                  f"{scores['cosine']:9.6f}")


if __name__ == "__main__":
    main()
