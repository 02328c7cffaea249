"""Tied parameters (one ``nn.Parameter`` held by two modules: a language model's token embedding
and output projection) on the emulated device. ``Module.to("mlu")`` makes a new Parameter per
holder on a device whose tensors cannot take a CPU tensor's ``.data`` (PrivateUse1), so the copy
on the device had two parameters where the model has one: each got a share of the gradient, and
``verify(grad=True)`` raised pairing the model's parameter names with the device's gradients (the
zoo's token models: issue 39). ``move_module`` keeps them tied."""
from __future__ import annotations

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn as nn

from mluverify.core.backends import move_module

TIED = """
import torch, torch.nn as nn

class TiedIds(nn.Module):
    '''Token ids bound as a buffer (no floating input) through an embedding whose weight is
    also the output projection's.'''

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10, 4)
        self.hidden = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10)
        self.head.weight = self.embedding.weight
        self.register_buffer("ids", torch.tensor([[1, 2, 3], [4, 5, 9]]))

    def forward(self):
        return self.head(torch.tanh(self.hidden(self.embedding(self.ids))))

def test_tied(verify):
    torch.manual_seed(0)
    verify(TiedIds(), op="tied", grad=True)
"""


def _tied_pair() -> nn.Sequential:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(6, 3), nn.Linear(3, 6))
    model[1].weight = model[0].weight
    return model


def test_move_module_keeps_a_tied_parameter_one_parameter_on_the_device():
    moved = move_module(_tied_pair(), "mlu")
    assert moved[0].weight.device.type == "mlu"
    assert moved[1].weight is moved[0].weight
    assert [name for name, _ in moved.named_parameters()] == ["0.weight", "1.bias"]


def test_the_tied_parameters_gradient_on_the_device_sums_both_uses():
    """The CPU's autograd on the same model is the reference: the embedding rows picked plus the
    projection's whole-matrix gradient land in one gradient."""
    model, ids = _tied_pair(), torch.tensor([0, 2, 2, 5])
    model(ids).square().sum().backward()
    moved = move_module(_tied_pair(), "mlu")
    moved(ids.to("mlu")).square().sum().backward()
    # The default core's products round their inputs to 10 mantissa bits (docs/device.md): 2e-4
    # here. A gradient split between two copies misses whole terms (off by up to 380 %).
    torch.testing.assert_close(moved[0].weight.grad.cpu(), model[0].weight.grad, rtol=2e-3, atol=1e-3)


@pytest.mark.slow
def test_verify_grad_of_a_tied_model_whose_only_inputs_are_integers(pytester):
    """Each distinct parameter's gradient is one record, judged and passing: no input gradient
    (the ids are integers)."""
    pytester.makepyfile(test_tied=TIED)
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}",
                                           "--mlu-target=mlu:cnnl", "--mlu-core-version=MLU370",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    frame = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()
    assert sorted(zip(frame.kind, frame.leaf)) == [
        ("grad", "embedding.weight.grad"), ("grad", "head.bias.grad"), ("grad", "hidden.bias.grad"),
        ("grad", "hidden.weight.grad"), ("output", "output")]
    assert (frame.status == "passed").all()
