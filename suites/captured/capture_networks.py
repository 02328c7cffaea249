"""Capture the suites' networks again into the shipped cases: ``python
suites/captured/capture_networks.py [NAME ...]`` from the repository root.

Each network of ``suites/networks`` (the same seeded weights and input as its suite cases) runs
one forward under ``torch.no_grad()`` on the emulated ``mlu`` inside ``mluverify.dump.capture``,
into ``suites/captured/<name>/`` (replaced): the ops a model dispatches depend on its device
(on the CPU, attention runs as CPU-only fused kernels). ``mnist_net_train`` is one training
step of the seed's MNIST ``Net`` (forward, ``nll_loss``, backward, SGD step), so its cases
include the backward. Each model keeps at most ``MAX_BYTES`` of real input values; past that
its cases keep recipes.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

import mluverify.device  # noqa: F401  (registers "mlu")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "networks"))

import test_networks  # noqa: E402  (the networks suite's models and inputs)

from mluverify.dump import capture  # noqa: E402

MAX_BYTES = 256 << 10  # real input values kept per model (the rest: recipes)
FORWARDS = {"mnist_net": "mnist_net", "test_model": "test_model", "resnet50": "resnet50",
            "vgg19": "vgg19", "gpt_decoder": "gpt_decoder", "bert_encoder": "bert_encoder"}


def model_and_input(network: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """The networks suite's ``network`` and input, on the emulated MLU."""
    net = next(net for net in test_networks.NETWORKS if net.name == network)
    model, x = test_networks._model_and_input(net)
    return model.to("mlu"), x.to("mlu")


def forward(network: str) -> Callable[[], None]:
    """One inference forward of the networks suite's ``network``."""
    model, x = model_and_input(network)

    def run() -> None:
        with torch.no_grad():
            model(x)

    return run


def mnist_training_step() -> Callable[[], None]:
    """One step of the seed's MNIST training flow: forward, nll_loss, backward, SGD."""
    model, x = model_and_input("mnist_net")
    model.train()
    target = torch.randint(0, 10, (x.shape[0],)).to("mlu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def run() -> None:
        optimizer.zero_grad()
        F.nll_loss(model(x), target).backward()
        optimizer.step()

    return run


CAPTURES: dict[str, Callable[[], Callable[[], None]]] = {
    **{name: (lambda network=network: forward(network)) for name, network in FORWARDS.items()},
    "mnist_net_train": mnist_training_step,
}


def main(names: list[str]) -> None:
    for name in names or CAPTURES:
        run = CAPTURES[name]()
        shutil.rmtree(HERE / name, ignore_errors=True)
        with capture(HERE / name, model=name, max_bytes=MAX_BYTES) as recording:
            run()
        print(f"{name}: {recording.cases} unique cases of {recording.ops} ops, "
              f"{sum(f.stat().st_size for f in recording.path.iterdir()) >> 10} KiB")


if __name__ == "__main__":
    main(sys.argv[1:])
