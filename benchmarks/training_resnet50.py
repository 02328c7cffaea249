"""One training step of torchvision ResNet-50 (seeded random weights, batch 8, 64x64, train
mode: forward, cross-entropy, backward, SGD) layer by layer on the emulated MLU vs the native
CPU, measured side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/training_resnet50.py [--repeats 5] [--core-version MLU270]
        [--matmul-precision int16] [--threads 1]

Prints the median step time of each, their ratio (target: at most 3x), the load average of the
machine (it is shared: absolute times vary a lot, the ratio is the figure), the median CPU time
of each step over all threads (what a change of the emulator's work shows under load, where the
wall ratio swings), the first step's loss and gradient error against the CPU, and the fallback
ops seen.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F
import torchvision

import mluverify.device as md
from mluverify.judge import metrics
from mluverify.device import mlu_model, numerics

BATCH, SIDE, LEARNING_RATE = 8, 64, 0.1


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
               labels: torch.Tensor) -> torch.Tensor:
    """Forward, loss, backward, SGD; returns the loss (synchronised: read on the CPU)."""
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.detach().cpu()


def timed(step: Callable[[], object]) -> tuple[float, float]:
    """``step()``'s wall time and the process's CPU time over all threads, in seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--core-version", default=numerics.DEFAULT_CORE_VERSION)
    parser.add_argument("--matmul-precision", default=None, choices=numerics.MATMUL_PRECISIONS,
                        help="MLU270's conv / matmul precision (default: the device's, int16)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's); 1 is steadier on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mlu_model.set_core_version(args.core_version)
    if args.matmul_precision:
        mlu_model.set_matmul_precision(args.matmul_precision)
    torch.manual_seed(0)
    cpu_model = torchvision.models.resnet50(weights=None, num_classes=10).train()
    mlu_model_ = copy.deepcopy(cpu_model).to("mlu")
    images, labels = torch.randn(BATCH, 3, SIDE, SIDE), torch.randint(0, 10, (BATCH,))
    images_mlu, labels_mlu = images.to("mlu"), labels.to("mlu")
    cpu_sgd = torch.optim.SGD(cpu_model.parameters(), LEARNING_RATE)
    mlu_sgd = torch.optim.SGD(mlu_model_.parameters(), LEARNING_RATE)

    expected_loss = train_step(cpu_model, cpu_sgd, images, labels)
    with md.track_fallbacks() as fallbacks:
        got_loss = train_step(mlu_model_, mlu_sgd, images_mlu, labels_mlu)
    grad_error = metrics(mlu_model_.fc.weight.grad.cpu(), cpu_model.fc.weight.grad)["rel_mse"]

    cpu_times, mlu_times = [], []
    for _ in range(args.repeats):
        cpu_times.append(timed(lambda: train_step(cpu_model, cpu_sgd, images, labels)))
        mlu_times.append(timed(lambda: train_step(mlu_model_, mlu_sgd, images_mlu, labels_mlu)))
    (cpu, cpu_busy), (dev, dev_busy) = ([statistics.median(column) for column in zip(*times)]
                                        for times in (cpu_times, mlu_times))
    settings = numerics.active_settings()
    print(f"ResNet-50 training step, batch {BATCH}, {SIDE}x{SIDE}; core version {settings.core_version}, "
          f"matmul precision {settings.matmul_precision}, torch threads {torch.get_num_threads()}, "
          f"{args.repeats} paired steps")
    print(f"native CPU step median     {cpu * 1e3:9.1f} ms")
    print(f"mlu layer-by-layer median  {dev * 1e3:9.1f} ms")
    print(f"ratio mlu / cpu            {dev / cpu:9.2f}x   (target <= 3x)")
    print(f"load average (1, 5, 15 min): {', '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"CPU time per step, all threads (median): native {cpu_busy * 1e3:.1f} ms, mlu {dev_busy * 1e3:.1f} ms")
    print(f"first step: loss {float(got_loss):.5f} vs {float(expected_loss):.5f} (CPU); "
          f"fc.weight gradient rel_mse {grad_error:.2e}; fallback ops: {dict(fallbacks.counts) or 'none'}")


if __name__ == "__main__":
    main()
