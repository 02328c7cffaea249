"""One epoch of the seeds' MNIST training on the emulated MLU (adaptive int8) and in float32 on
the CPU, from the same seed, side by side: the test accuracies must be within 2 points.

    PYTHONPATH=. .venv/bin/python examples/mnist_training/compare.py [--seed 0]

The MLU run is ``mnist.py`` itself, run as ``mluverify exec`` runs it (``torch_mlu`` resolved to
the emulator). The CPU run trains the script's own ``Net`` on the script's own data sets with the
script's settings (SGD, lr 0.1, batch 64, one epoch) in float32. Both start from the same seed, so
they share initial weights, batch order and dropout masks (the device's generator draws the
CPU's masks, seeded alike): the difference is the device's arithmetic.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import re
import runpy
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader

SCRIPT = Path(__file__).with_name("mnist.py")
ACCURACY = re.compile(r"Accuracy: (\d+)/(\d+)")


def _seed(seed: int) -> None:
    from mluverify.device import mlu_model

    torch.manual_seed(seed)
    mlu_model.manual_seed(seed)


def run_on_mlu(seed: int) -> tuple[float, dict, float]:
    """Run mnist.py on the emulated MLU (its checkpoint goes to a temporary directory); returns
    (test accuracy, the script's globals, seconds)."""
    from mluverify import compat

    compat.install()
    printed = io.StringIO()
    started = time.perf_counter()
    previous = os.getcwd()
    sys.path.insert(0, str(SCRIPT.parent))
    with tempfile.TemporaryDirectory() as workdir, contextlib.redirect_stdout(printed):
        os.chdir(workdir)
        _seed(seed)
        try:
            script = runpy.run_path(str(SCRIPT), run_name="__main__")
        finally:
            os.chdir(previous)
            sys.path.remove(str(SCRIPT.parent))
    correct, total = map(int, ACCURACY.findall(printed.getvalue())[-1])
    return correct / total, script, time.perf_counter() - started


def run_on_cpu(script: dict, seed: int) -> tuple[float, float]:
    """The same training (one epoch) in float32 on the CPU; returns (test accuracy, seconds)."""
    started = time.perf_counter()
    _seed(seed)
    net = script["Net"]()  # the MLU run's initial weights: the first draws after the seed
    optimizer = optim.SGD(net.parameters(), 1e-1)
    batches = iter(DataLoader(script["train_set"], batch_size=64, shuffle=True))
    first = next(batches)  # draws the shuffle seed, as the MLU run's epoch did
    torch.default_generator.manual_seed(seed)  # dropout: the stream the device generator drew
    net.train()
    for image, label in itertools.chain([first], batches):
        optimizer.zero_grad()
        F.nll_loss(net(image), label).backward()
        optimizer.step()
    return _accuracy(net, script["test_set"]), time.perf_counter() - started


def _accuracy(net: torch.nn.Module, test_set) -> float:
    net.eval()
    correct = 0
    with torch.no_grad():
        for image, label in DataLoader(test_set, batch_size=64):
            correct += int((net(image).argmax(1) == label).sum())
    return correct / len(test_set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    mlu_accuracy, script, mlu_s = run_on_mlu(args.seed)
    if script["nums_epoch"] != 1:
        raise SystemExit(f"mnist.py trains {script['nums_epoch']} epochs; this comparison trains one")
    cpu_accuracy, cpu_s = run_on_cpu(script, args.seed)
    gap = 100 * (mlu_accuracy - cpu_accuracy)
    print(f"test accuracy after one epoch ({len(script['train_data'])} steps), seed {args.seed}:")
    print(f"  mlu, adaptive int8: {100 * mlu_accuracy:6.2f} %  ({mlu_s:.1f} s)")
    print(f"  cpu, float32:       {100 * cpu_accuracy:6.2f} %  ({cpu_s:.1f} s)")
    print(f"  difference: {gap:+.2f} points (target: within 2); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
