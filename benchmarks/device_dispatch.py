"""Dispatch overhead of a small op on the emulated MLU: 64x64 float32 ``add``, side by side
with the same add on the CPU in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/device_dispatch.py [--calls 5000]

Prints the median per call of each and their ratio (target: mlu median at most 50 us).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import mluverify.device  # noqa: F401  (registers "mlu")


def _median_us(fn, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    torch.manual_seed(0)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    a_mlu, b_mlu = a.to("mlu"), b.to("mlu")
    if not torch.equal((a_mlu + b_mlu).cpu(), a + b):
        raise SystemExit("mlu add disagrees with the CPU: benchmark aborted")
    for _ in range(200):  # warm-up
        a_mlu + b_mlu
        a + b
    cpu = _median_us(lambda: a + b, args.calls)
    mlu = _median_us(lambda: a_mlu + b_mlu, args.calls)
    print(f"64x64 add, median of {args.calls} calls: cpu {cpu:6.1f} us, mlu {mlu:6.1f} us "
          f"(ratio {mlu / cpu:5.1f}x; target mlu <= 50 us: {'met' if mlu <= 50 else 'NOT met'})")


if __name__ == "__main__":
    main()
