"""compare() on a 4M-element float32 pair vs torch.testing.assert_close on the same pair.

Target (issue 2): at most 3x. Prints medians of paired runs and their ratio.
Run: .venv/bin/python benchmarks/compare_cost.py
"""
from __future__ import annotations

import statistics
import time

import torch

from mluverify.compare import compare


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


if __name__ == "__main__":
    main()
