"""torchvision ResNet-50 (seeded random weights, batch 1, 224x224, eval, no_grad) layer by
layer on the emulated MLU vs the native CPU forward, measured side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/device_resnet50.py [--repeats 15] [--core-version MLU270] [--threads 1]

Prints the median of each and their ratio (target: at most 2.0x), plus the fallback ops seen.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchvision

import mluverify.device as md
from mluverify.device import mlu_model


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--core-version", default=md.numerics.DEFAULT_CORE_VERSION)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's); 1 is steadier on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mlu_model.set_core_version(args.core_version)
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
    print(f"core version {args.core_version}, torch threads {torch.get_num_threads()}, {args.repeats} paired runs")
    print(f"native CPU forward median  {cpu * 1e3:8.2f} ms")
    print(f"mlu layer-by-layer median  {dev * 1e3:8.2f} ms")
    print(f"ratio mlu / cpu            {dev / cpu:8.2f}x   (target <= 2.0x)")
    print(f"output relative L2 error vs CPU {rel:.2e}; fallback ops: {dict(fallbacks.counts) or 'none'}")


if __name__ == "__main__":
    main()
