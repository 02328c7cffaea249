"""Dropout on the device draws its masks from the device's own generator: separate from the
CPU's (device dropout leaves the CPU generator where it was), with the CPU's algorithm, so that
a CPU run seeded alike drops the same elements and training can be compared step by step."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import mluverify.device as md
from mluverify.device import training

SEED = 1234


def _seeded_cpu(fn, x):
    torch.default_generator.manual_seed(SEED)
    return fn(x)


def _seeded_device(fn, x):
    training.manual_seed(SEED)
    with md.track_fallbacks() as fallbacks:
        out = fn(x.to("mlu"))
    assert fallbacks.ops == ()
    return out.cpu()


@pytest.mark.parametrize("fn", [lambda x: F.dropout(x, 0.3, training=True),
                                lambda x: F.dropout2d(x, 0.5, training=True),
                                lambda x: F.dropout1d(x[..., 0], 0.25, training=True)],
                         ids=["dropout", "dropout2d", "dropout1d"])
def test_same_seed_drops_the_same_elements_as_the_cpu(fn):
    x = torch.rand(8, 16, 5, 5) + 0.5  # no zeros: a zero output means dropped
    expected = _seeded_cpu(fn, x)
    got = _seeded_device(fn, x)
    assert torch.equal(got == 0, expected == 0)
    kept = expected != 0
    assert 0.3 < kept.float().mean() < 0.9
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)


def test_float16_dropout_draws_the_masks_of_float32():
    x = torch.rand(64, 32) + 0.5
    expected = _seeded_cpu(lambda t: F.dropout(t, 0.4), x)
    got = _seeded_device(lambda t: F.dropout(t, 0.4), x.half())
    assert torch.equal(got == 0, expected == 0)


def test_device_dropout_leaves_the_cpu_generator_alone():
    state = torch.default_generator.get_state()
    F.dropout(torch.ones(100).to("mlu"), 0.5)
    assert torch.equal(torch.default_generator.get_state(), state)


def test_device_generator_advances_and_can_be_restored():
    x = torch.ones(1000).to("mlu")
    training.manual_seed(7)
    saved = training.get_rng_state()
    first, second = F.dropout(x, 0.5).cpu(), F.dropout(x, 0.5).cpu()
    assert not torch.equal(first, second)
    training.set_rng_state(saved)
    assert torch.equal(F.dropout(x, 0.5).cpu(), first)
    assert training.initial_seed() == 7


def test_dropout_backward_scales_the_kept_gradients():
    x = torch.rand(6, 7).to("mlu").requires_grad_()
    training.manual_seed(3)
    out = F.dropout(x, 0.25)
    out.backward(torch.full((6, 7), 2.0).to("mlu"))
    kept = (out.detach().cpu() != 0).float()
    torch.testing.assert_close(x.grad.cpu(), kept * 2.0 / 0.75, rtol=1e-6, atol=0)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_edge_probabilities(p):
    x = torch.rand(4, 5) + 0.5
    got = F.dropout(x.to("mlu"), p).cpu()
    torch.testing.assert_close(got, x if p == 0 else torch.zeros_like(x), rtol=0, atol=0)


def test_eval_mode_dropout_is_the_identity():
    x = torch.rand(4, 5)
    assert torch.equal(F.dropout(x.to("mlu"), 0.5, training=False).cpu(), x)


@pytest.mark.parametrize("seed", [True, 1.5, "1"])
def test_manual_seed_needs_an_int(seed):
    with pytest.raises(TypeError, match="'seed' must be an int"):
        training.manual_seed(seed)
