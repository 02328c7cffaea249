"""Training on the device, step by step: N SGD steps of the seeds' MNIST ``Net`` (seed 001), a
small ResNet and a transformer block on ``mlu:cnnl`` against the CPU.

Each step is its own case: the device and the CPU start from the parameters the CPU's training
reached before that step, take the step's batch, run one training step (forward, loss,
backward, SGD with the seeds' learning rate 0.1) and are judged on the loss, every gradient and
every updated parameter, each its own record (``verify(..., grad=True, optimizer=...)``, kinds
output / grad / param). Dropout draws the same masks on both sides (the step's seed seeds torch;
the device's generator follows the CPU's algorithm); batch norm trains on batch statistics.
Known deviations (``waivers.toml`` beside this file) are applied as ``mlu_waiver`` marks.
float16 is ``mlu_heavy``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, NamedTuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from training_waivers import waiver_marks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "networks"))
from network_models import DecoderBlock, Net  # noqa: E402  (the networks suite's models)

STEPS = 3
LEARNING_RATE = 0.1  # the seeds' SGD


class LossOf(nn.Module):
    """A training step's forward: the model, then its loss against the target."""

    def __init__(self, model: nn.Module, loss: Callable) -> None:
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.loss(self.model(x), target)


def _small_resnet() -> nn.Module:
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


class Training(NamedTuple):
    name: str
    build: Callable[[], nn.Module]
    batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]]
    loss: Callable


def _images(shape: tuple[int, ...], classes: int) -> Callable:
    return lambda g: (torch.randn(*shape, generator=g), torch.randint(0, classes, shape[:1], generator=g))


TRAININGS = (
    Training("mnist_net", Net, _images((8, 1, 28, 28), 10), F.nll_loss),
    Training("resnet18_small", _small_resnet, _images((4, 3, 64, 64), 10), F.cross_entropy),
    Training("transformer_block", lambda: DecoderBlock(32, 4),
             lambda g: (torch.randn(2, 8, 32, generator=g), torch.randn(2, 8, 32, generator=g)), F.mse_loss),
)


def _sgd(parameters) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=LEARNING_RATE)


def _params() -> list:
    params = []
    for training in TRAININGS:
        for dtype in ("float32", "float16"):
            for step in range(STEPS):
                name = f"{training.name}-{dtype}-step{step}"
                marks = waiver_marks(name)
                if dtype != "float32":
                    marks.append(pytest.mark.mlu_heavy)
                params.append(pytest.param(training, dtype, step, id=name, marks=marks))
    return params


def _state_before(training: Training, step: int) -> tuple[LossOf, tuple]:
    """The model after ``step`` steps of CPU training (seeded like the verified steps) and the
    batch of step ``step``."""
    torch.manual_seed(0)
    step_module = LossOf(training.build().train(), training.loss)
    optimizer = _sgd(step_module.parameters())
    batches = torch.Generator().manual_seed(1)
    for done in range(step):
        batch = training.batch(batches)
        torch.manual_seed(done)  # the masks the verified step `done` drew
        optimizer.zero_grad()
        step_module(*batch).backward()
        optimizer.step()
    return step_module, training.batch(batches)


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")  # the seed's Net applies Dropout2d to 2-D input
@pytest.mark.mlu_targets("mlu:cnnl")
@pytest.mark.parametrize("training, dtype, step", _params())
def test_sgd_step(verify, training: Training, dtype: str, step: int) -> None:
    step_module, batch = _state_before(training, step)
    verify(step_module, *batch, op=training.name, dtype=dtype, seed=step, grad=True, optimizer=_sgd)
