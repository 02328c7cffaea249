"""compare() on a 4M-element float32 pair vs torch.testing.assert_close on the same pair.

Target (issue 2): at most 3x. Prints medians of paired runs and their ratio; then what a
torch reduction costs right after the judge's dot products, after a BLAS dot (numpy ``@``,
which the judge avoids) and alone — the reason ``_metrics._dot`` uses einsum.
Run: .venv/bin/python benchmarks/compare_cost.py
"""
from __future__ import annotations

import statistics
import time

import torch

from mluverify.judge import compare


def median_seconds(fn, repeats: int = 15) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    expected = torch.randn(4 * 1024 * 1024)
    actual = expected + 1e-7 * torch.randn_like(expected)
    ours = median_seconds(lambda: compare(actual, expected))
    torchs = median_seconds(lambda: torch.testing.assert_close(actual, expected))
    print(f"compare():                    {ours * 1e3:8.2f} ms")
    print(f"torch.testing.assert_close(): {torchs * 1e3:8.2f} ms")
    print(f"ratio compare / assert_close: {ours / torchs:8.2f}x (target <= 3x)")
    blas_contention()


def reduction_after(dot) -> float:
    """Median seconds of a torch sum of 800 k floats run right after ``dot`` on 800 k
    float64 values (``dot`` itself not timed)."""
    import numpy as np

    values = np.random.default_rng(0).standard_normal(800_000)
    tensor = torch.randn(800_000)
    times = []
    for _ in range(50):
        dot(values)
        start = time.perf_counter()
        tensor.sum()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def blas_contention() -> None:
    from mluverify.judge._metrics import _dot

    alone = reduction_after(lambda values: None)
    ours = reduction_after(lambda values: _dot(values, values))
    blas = reduction_after(lambda values: values @ values)
    print(f"torch sum of 800k floats (torch threads {torch.get_num_threads()}): alone "
          f"{alone * 1e6:.0f} us, after the judge's dot {ours * 1e6:.0f} us, after a BLAS dot "
          f"{blas * 1e6:.0f} us")


if __name__ == "__main__":
    main()
