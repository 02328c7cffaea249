"""Offline ResNet50: load + first result in a fresh process against capture + first result online.

torchvision ResNet50 (batch 1, 224x224, inference, seeded random weights) is saved once as an
offline model. Then, in turn, fresh processes measure

- online (seeds' flow): ``torch.jit.trace(model, x)``, ``.to("mlu")`` and its first result
  (trace, capture, partition, build, run): the online fused mode ``save_as_cambricon`` wraps;
- online (``fuse``): ``fuse(model, (x,))`` and its first result (torch.export capture, ...);
- offline: ``mluverify.device.offline.load(path)`` and its first result (read, build, run),

each after ``import torch`` and ``import mluverify.device`` (the same in both, not timed),
with ``--threads`` torch threads (default 1: on a shared machine, idle threads of other
processes' pools and our own spinning ones make wall times scatter). It prints every run (wall
and process CPU seconds), the medians, their ratios (target <= 0.5x) and whether the two
results are equal bit for bit.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/offline_resnet50.py [--repeats N] [--threads N]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("online-jit", "online-fuse", "offline")


def resnet50_on_mlu() -> tuple[torch.nn.Module, torch.Tensor]:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    return model.to("mlu"), torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)).to("mlu")


def child(side: str, directory: Path, threads: int) -> None:
    """One fresh-process measurement; prints wall and CPU seconds, saves the result."""
    import mluverify.device  # noqa: F401  (not timed, on either side)

    torch.set_grad_enabled(False)
    torch.set_num_threads(threads)
    if side == "online-fuse":
        from mluverify.device.fusion import fuse

        model, x = resnet50_on_mlu()
        start, cpu = time.perf_counter(), time.process_time()
        out = fuse(model, (x,))(x)
    elif side == "online-jit":
        model, x = resnet50_on_mlu()
        model, x_cpu = model.cpu(), x.cpu()
        start, cpu = time.perf_counter(), time.process_time()
        traced = torch.jit.trace(model, x_cpu, check_trace=False)
        traced.to("mlu")
        out = traced(x)
    else:
        from mluverify.device import offline

        x = torch.load(directory / "input.pt").to("mlu")
        start, cpu = time.perf_counter(), time.process_time()
        out = offline.load(directory / "resnet50.cambricon")(x)
    result = out.cpu()
    print(f"{time.perf_counter() - start:.3f} {time.process_time() - cpu:.3f}")
    torch.save(result, directory / f"{side}.pt")


def run_child(side: str, directory: Path, threads: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process's measurement."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--child", side, "--dir", str(directory), "--threads", str(threads)],
                          capture_output=True, text=True, env=env, check=True)
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", choices=SIDES)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.dir, args.threads)
        return

    with tempfile.TemporaryDirectory(prefix="offline-resnet50-") as name:
        directory = Path(name)
        import mluverify.device  # noqa: F401
        from mluverify.device import offline

        torch.set_grad_enabled(False)
        model, x = resnet50_on_mlu()
        torch.save(x.cpu(), directory / "input.pt")
        offline.save(model, (x,), directory / "resnet50.cambricon")
        size = (directory / "resnet50.cambricon").stat().st_size / 2**20
        print(f"offline model: {size:.0f} MiB")
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
        for i in range(args.repeats):
            for side in SIDES[i % 3:] + SIDES[:i % 3]:  # each side first in turn
                times[side].append(run_child(side, directory, args.threads))
                print(f"run {i + 1} {side:12s} {times[side][-1][0]:.2f} s wall, {times[side][-1][1]:.2f} s CPU", flush=True)
        median = {side: [statistics.median(t[k] for t in runs) for k in (0, 1)] for side, runs in times.items()}
        result = {side: torch.load(directory / f"{side}.pt") for side in SIDES}
        for side in SIDES:
            print(f"{side:12s} first result (median): {median[side][0]:.2f} s wall, {median[side][1]:.2f} s CPU")
        for online in SIDES[:2]:
            print(f"offline / {online}: {median['offline'][0] / median[online][0]:.2f}x wall, "
                  f"{median['offline'][1] / median[online][1]:.2f}x CPU (target <= 0.5x); "
                  f"results bit-identical: {torch.equal(result['offline'], result[online])}")


if __name__ == "__main__":
    main()
