"""How often the emulated MLU's float32 results differ from the CPU's, from a run's records, and
why a reduction with a one-element result often does not.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/baseline_deviation.py [RECORDS]`` (default:
``reports/baseline/records.parquet``). "Differ" means ``max_abs > 0``: ``rel_mse`` reports a small
total error as 0 (Cambricon's eps rule), so it cannot tell. The second part draws sums of
normal float32 values and counts how often the device's per-core sum (4 cores, docs/device.md,
"Reductions") has exactly the bits of ``torch.sum``, for 4, 16 and 64 lanes per core: both are
accurate, so a one-element result often rounds to the same float32 number, whatever the
summation order. It also splits the records whose ``value`` is exactly 0. The third part counts,
per input distribution of the suites, how often a sum over one dim equals the CPU's everywhere.
"""
from __future__ import annotations

import sys

import pandas as pd
import torch

MATMUL = ("conv1d", "conv2d", "conv3d", "conv_transpose2d", "mm", "addmm", "addmm_alpha_beta", "bmm",
          "linear", "linear_no_bias", "matmul_broadcast", "matmul_vector", "lstm", "gru")
SCALAR_REDUCTIONS = ("sum", "mean", "var_unbiased")  # the ops suite's reductions to one element
REDUCTIONS = (*SCALAR_REDUCTIONS, "sum_dim", "sum_dim_keepdim", "mean_dim", "var", "std", "softmax",
              "log_softmax", "layer_norm", "group_norm", "avg_pool1d", "avg_pool2d",
              "avg_pool2d_no_pad_count", "avg_pool3d", "adaptive_avg_pool2d")


def share_line(label: str, records: pd.DataFrame) -> str:
    differ = records["max_abs"] > 0
    return f"{label:58} {len(records):6} cases, {100 * differ.mean():5.1f} % differ ({int((~differ).sum())} equal)"


def records_part(path: str) -> None:
    records = pd.read_parquet(path)
    float32 = records[(records["dtype"] == "float32") & records["target"].str.startswith("mlu")]
    ops = float32[float32["suite"] == "ops"]
    reductions = ops[ops["op"].isin(REDUCTIONS)]
    print(f"{path}: {len(records)} records, {int((records['value'] == 0).sum())} with value 0")
    print(share_line("every float32 mlu output", float32))
    print(share_line("ops suite, the matmul class", ops[ops["op"].isin(MATMUL)]))
    print(share_line("ops suite, per-core reductions", reductions))
    print(share_line("  of which one-element results (sum, mean, var_unbiased)",
                     reductions[reductions["op"].isin(SCALAR_REDUCTIONS)]))
    print(share_line("  of which the others", reductions[~reductions["op"].isin(SCALAR_REDUCTIONS)]))


def zero_values_part(path: str) -> None:
    """Why ``value`` (rel_mse with Cambricon's eps rule) is exactly 0 so often."""
    records = pd.read_parquet(path)
    zero = records[records["value"] == 0]
    equal, small = zero[zero["max_abs"] == 0], zero[zero["max_abs"] > 0]
    print(f"value == 0 in {len(zero)} of {len(records)} records: {len(equal)} bit for bit equal to the CPU, "
          f"{len(small)} differ but the eps rule reads their total squared error as 0, "
          f"{int(zero['max_abs'].isna().sum())} non-floating outputs (metric 'exact')")
    by_suite = equal.groupby(["suite", "dtype"]).size()
    print("  bit for bit equal, by suite: " + ", ".join(f"{suite} {dtype} {n}" for (suite, dtype), n in by_suite.items()))


def scalar_sum_part(draws: int = 200) -> None:
    """One-element sums: how often the device's bits equal torch.sum's, for several lane
    counts (``reductions.LANES``, 64 on the device; the others only for this comparison)."""
    from mluverify.device import reductions

    for lanes in (4, 16, 64):
        reductions.LANES, kept = lanes, reductions.LANES
        try:
            generator = torch.Generator().manual_seed(0)
            for size in (64, 512, 5832, 100_000):
                same = sum(bool(reductions.core_sum(x, None, 4) == x.sum())
                           for x in (torch.randn(size, generator=generator) for _ in range(draws)))
                print(f"{lanes:2} lanes, sum of {size:7} normal float32 values: device bits == torch.sum in "
                      f"{100 * same / draws:4.1f} % of {draws} draws")
        finally:
            reductions.LANES = kept


def distribution_part(draws: int = 200) -> None:
    """Sums over one dim of tensors shaped like the ops suite's (2-3 sides of 8 to 18), per
    input distribution of ``mluverify.strategies``: how many cases equal the CPU's bit for bit."""
    import numpy as np

    from mluverify.device.reductions import core_sum
    from mluverify.strategies import DISTRIBUTIONS, values

    rng = np.random.default_rng(0)
    for distribution in DISTRIBUTIONS:
        same = 0
        for seed in range(draws):
            shape = tuple(int(side) for side in rng.integers(8, 19, rng.integers(2, 4)))
            x = torch.from_numpy(values(shape, distribution, seed))
            dim = int(rng.integers(0, len(shape)))
            same += bool(torch.equal(core_sum(x, [dim], 4), x.sum(dim)))
        print(f"sum over one dim, {distribution:12} inputs: every element equal to torch.sum's in "
              f"{100 * same / draws:5.1f} % of {draws} cases")


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "reports/baseline/records.parquet"
    records_part(path)
    zero_values_part(path)
    scalar_sum_part()
    distribution_part()
