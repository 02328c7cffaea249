"""Fused ResNet50 on the emulated MLU, side by side with native CPU eager in the same run.

Figures (torchvision ResNet50, batch 1, 224x224, inference, random weights):

- first call: capture + build + first result of ``fuse`` (seconds);
- steady-state ratios to native CPU eager (medians of paired runs, alternating order):
  whole network fused (one group), fused with ``DEBUG_FORCED_FALLBACK_OPS=aten::add.Tensor``
  (one group per residual block), and layer-by-layer ``mlu`` (every op a device kernel).

Each ratio is given for wall time and for process CPU time: on a shared machine the wall
ratio carries the noise of other processes, the CPU-time ratio much less of it. The fused
output's rel_mse against native eager is printed too (MLU270 quantizes the folded convolutions
to int16 by default; ``--matmul-precision float`` runs them unquantized).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/fusion_resnet50.py [--repeats N] [--threads 1]
[--matmul-precision float]``.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from typing import Callable

import torch


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and process CPU seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def paired_ratio(candidate: Callable[[], object], native: Callable[[], object], repeats: int) -> str:
    """Medians of candidate/native wall and CPU time over ``repeats`` back-to-back pairs
    (order alternating), formatted."""
    wall, cpu = [], []
    for i in range(repeats):
        order = (candidate, native) if i % 2 == 0 else (native, candidate)
        times = {fn: timed(fn) for fn in order}
        wall.append(times[candidate][0] / times[native][0])
        cpu.append(times[candidate][1] / times[native][1])
    return f"{statistics.median(wall):.2f}x wall, {statistics.median(cpu):.2f}x CPU time"


def fused_with_env(model_on_mlu, x_mlu, forced: str):
    """``fuse`` the model with ``DEBUG_FORCED_FALLBACK_OPS`` set to ``forced`` while it builds."""
    from mluverify.device.fusion import fuse

    previous = os.environ.get("DEBUG_FORCED_FALLBACK_OPS")
    os.environ["DEBUG_FORCED_FALLBACK_OPS"] = forced
    try:
        fused = fuse(model_on_mlu, (x_mlu,))
        return fused.runtime.program((x_mlu,)), fused
    finally:
        if previous is None:
            del os.environ["DEBUG_FORCED_FALLBACK_OPS"]
        else:
            os.environ["DEBUG_FORCED_FALLBACK_OPS"] = previous


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--matmul-precision", default=None, help="MLU270's conv / matmul precision (default int16)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's); 1 is steadier on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    import torchvision

    import mluverify.device  # noqa: F401  (registers the device)
    from mluverify.device import mlu_model, numerics

    if args.matmul_precision:
        mlu_model.set_matmul_precision(args.matmul_precision)

    torch.set_grad_enabled(False)
    model = torchvision.models.resnet50().eval()
    x = torch.rand(1, 3, 224, 224)
    model_on_mlu = copy.deepcopy(model).to("mlu")
    x_mlu = x.to("mlu")

    def native():
        return model(x)

    start = time.perf_counter()
    whole_program, whole = fused_with_env(model_on_mlu, x_mlu, "")
    whole(x_mlu).cpu()
    first_call = time.perf_counter() - start
    split_program, split = fused_with_env(model_on_mlu, x_mlu, "aten::add.Tensor")

    for fn in (native, lambda: whole(x_mlu), lambda: split(x_mlu), lambda: model_on_mlu(x_mlu)):
        fn()  # warm-up
    native_wall = statistics.median(timed(native)[0] for _ in range(5))
    settings = numerics.active_settings()
    expected, fused_out = native().double(), whole(x_mlu).cpu().double()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"native CPU eager {native_wall * 1000:.1f} ms (wall, median of 5)")
    print(f"core version {settings.core_version}, matmul precision {settings.matmul_precision}, core number "
          f"{settings.core_number}: fused output rel_mse vs CPU "
          f"{((fused_out - expected).norm() / expected.norm()).item():.2e}")
    print(f"first call (capture + build + first result): {first_call:.2f} s wall "
          f"= {first_call / native_wall:.1f} native forwards")
    print(f"whole network fused, {len(whole_program.groups)} group(s) / native CPU eager: "
          f"{paired_ratio(lambda: whole(x_mlu), native, args.repeats)}")
    print(f"DEBUG_FORCED_FALLBACK_OPS=aten::add.Tensor, {len(split_program.groups)} groups / native: "
          f"{paired_ratio(lambda: split(x_mlu), native, args.repeats)}")
    few = max(4, args.repeats // 4)
    print(f"layer-by-layer mlu / native: {paired_ratio(lambda: model_on_mlu(x_mlu), native, few)}")
    print(f"fused / layer-by-layer mlu: {paired_ratio(lambda: whole(x_mlu), lambda: model_on_mlu(x_mlu), few)}")


if __name__ == "__main__":
    main()
