"""The seeds' training API: ``ct.set_cnml_enabled``, ``ct.to(optimizer, device)`` and the
checkpoint of seed 001 (``torch.save({"state_dict", "optimizer", "epoch"})``) round trip on
the device, resuming training exactly where it stopped."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import mluverify.device as md
from mluverify.device import kernels
from mluverify.device import mlu_model as ct
from mluverify.device import training
from mluverify.device.numerics import numerics_settings
from mluverify.device.quantization import adaptive_quantize


@pytest.fixture
def restore_cnml():
    """The process-wide kernel mode and fusion switch, restored after the test."""
    mode, fusion = kernels.active_mode(), ct._jit_can_fuse_on_mlu()
    yield
    kernels.set_default_mode(mode)
    ct._jit_override_can_fuse_on_mlu(fusion)


def test_set_cnml_enabled_false_selects_cnnl_kernels_without_fusion(restore_cnml):
    ct.set_cnml_enabled(False)
    assert not ct.get_cnml_enabled() and not ct._jit_can_fuse_on_mlu()
    assert kernels.active_mode() == ct.get_running_mode() == "cnnl"
    ct.set_cnml_enabled(True)
    assert ct.get_cnml_enabled() and ct._jit_can_fuse_on_mlu()
    assert kernels.active_mode() == "cnml"


def test_set_cnml_enabled_reaches_autograds_backward_thread(restore_cnml):
    """The backward ops of ``mlu`` tensors run on autograd's own thread: the switch must hold
    there too (a kernel registered for cnml only shows which mode ran)."""
    seen = []

    def tanh_backward_cnml(grad_output, output):
        seen.append(kernels.active_mode())
        return torch.ops.aten.tanh_backward.default(grad_output, output)

    md.kernel_registry().register("aten::tanh_backward", tanh_backward_cnml, mode="cnml")  # in force at once
    try:
        ct.set_cnml_enabled(True)
        x = torch.randn(5).to("mlu").requires_grad_()
        torch.tanh(x).sum().backward()
    finally:
        md.reload_kernels()
    assert seen == ["cnml"]


@pytest.mark.parametrize("flag", [0, 1, "False", None])
def test_set_cnml_enabled_needs_a_bool(flag):
    with pytest.raises(TypeError, match=r"'flag' must be True \(inference, CNML\) or False"):
        ct.set_cnml_enabled(flag)


class Small(nn.Module):
    """Conv, dropout and linear: the layer kinds of the seeds' MNIST Net, small."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.dropout = nn.Dropout(0.25)
        self.fc = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = self.dropout(F.relu(self.conv(x)))
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


def _batches(count: int):
    generator = torch.Generator().manual_seed(5)
    return [(torch.randn(4, 1, 8, 8, generator=generator), torch.randint(0, 10, (4,), generator=generator))
            for _ in range(count)]


def _train(net, optimizer, batches) -> None:
    net.train()
    for image, label in batches:
        optimizer.zero_grad()
        loss = F.nll_loss(net(image.to(ct.mlu_device())), label.to(ct.mlu_device()))
        loss.backward()
        optimizer.step()


def _fresh(bitwidth: int = 8):
    torch.manual_seed(0)
    net = adaptive_quantize(model=Small(), steps_per_epoch=4, bitwidth=bitwidth).to(ct.mlu_device())
    optimizer = ct.to(torch.optim.SGD(net.parameters(), 1e-1, momentum=0.9), torch.device("mlu"))
    return net, optimizer


def test_training_steps_run_on_the_device():
    net, optimizer = _fresh()
    with md.track_fallbacks() as fallbacks:
        _train(net, optimizer, _batches(2))
    assert fallbacks.ops == ()
    assert optimizer.state[net.fc.weight]["momentum_buffer"].device.type == "mlu"


def test_checkpoint_round_trip_resumes_training_bit_for_bit(tmp_path):
    batches = _batches(5)
    net, optimizer = _fresh()
    _train(net, optimizer, batches[:3])
    checkpoint = {"state_dict": net.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 0}
    torch.save(checkpoint, tmp_path / "model.pth")
    loaded = torch.load(tmp_path / "model.pth")
    assert loaded["epoch"] == 0
    assert loaded["state_dict"]["fc.weight"].device.type == "mlu"
    assert loaded["optimizer"]["state"][0]["momentum_buffer"].device.type == "mlu"

    resumed, resumed_optimizer = _fresh()
    resumed.load_state_dict(loaded["state_dict"])
    resumed_optimizer.load_state_dict(loaded["optimizer"])
    for model, opt in ((net, optimizer), (resumed, resumed_optimizer)):
        training.manual_seed(9)  # the same dropout masks for both continuations
        _train(model, opt, batches[3:])
    for (name, expected), got in zip(net.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(got.cpu(), expected.cpu()), name


def test_ct_to_moves_optimizer_state_to_the_parameters_device():
    model = nn.Linear(3, 2).to("mlu")
    adam = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3).to("mlu")).sum().backward()
    adam.step()
    state = adam.state[model.weight]
    state.update({key: value.cpu() for key, value in state.items()})  # as if loaded on the CPU
    assert ct.to(adam, ct.mlu_device()) is adam
    state = adam.state[model.weight]
    assert (state["exp_avg"].device.type, state["exp_avg_sq"].device.type) == ("mlu", "mlu")
    assert state["step"].device.type == "cpu"  # torch keeps Adam's step counter on the CPU
    model(torch.randn(4, 3).to("mlu")).sum().backward()
    adam.step()


@pytest.mark.parametrize("not_an_optimizer", [nn.Linear(2, 2), [1, 2], None])
def test_ct_to_of_something_else_names_the_argument(not_an_optimizer):
    with pytest.raises(TypeError, match=r"'optimizer' must be a torch.optim.Optimizer .* got"):
        ct.to(not_an_optimizer, torch.device("mlu"))


@pytest.mark.parametrize("device", ["cuda", "gpu", 3.5])
def test_ct_to_an_unknown_device_lists_the_valid_ones(device):
    optimizer = torch.optim.SGD(nn.Linear(2, 2).to("mlu").parameters(), 0.1)
    with pytest.raises(ValueError, match=r"'device' must be one of \('cpu', 'mlu'\)"):
        ct.to(optimizer, device)


def test_ct_to_with_parameters_elsewhere_says_to_move_the_model_first():
    optimizer = torch.optim.SGD(nn.Linear(2, 2).parameters(), 0.1)
    with pytest.raises(ValueError, match=r"parameter 0 of param group 0 is on cpu; move the model to mlu"):
        ct.to(optimizer, torch.device("mlu"))


def test_the_device_runs_the_float_model_unchanged_by_a_deep_copy():
    """adaptive_quantize copies: the float model given to it keeps its layers and parameters."""
    float_net = Small()
    before = copy.deepcopy(float_net.state_dict())
    net = adaptive_quantize(model=float_net, steps_per_epoch=4)
    assert type(float_net.fc) is nn.Linear and net.fc is not float_net.fc
    for name, value in float_net.state_dict().items():
        assert torch.equal(value, before[name])


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.SGD(params, 0.1, momentum=0.9, weight_decay=1e-2),
    lambda params: torch.optim.Adam(params, 1e-2),
], ids=["sgd-momentum-weight-decay", "adam"])
def test_optimizer_steps_run_on_the_device_and_match_the_cpu(make_optimizer):
    """The updates are elementwise: with products as the CPU computes them, every step matches."""
    torch.manual_seed(0)
    cpu_model = nn.Linear(5, 3)
    mlu_model = copy.deepcopy(cpu_model).to("mlu")
    optimizers = [make_optimizer(cpu_model.parameters()), make_optimizer(mlu_model.parameters())]
    x = torch.randn(6, 5)
    with md.track_fallbacks() as fallbacks, numerics_settings(matmul_precision="float"):
        for _ in range(3):
            for model, optimizer, device in ((cpu_model, optimizers[0], "cpu"), (mlu_model, optimizers[1], "mlu")):
                optimizer.zero_grad()
                model(x.to(device)).square().sum().backward()
                optimizer.step()
    assert fallbacks.ops == ()
    for expected, got in zip(cpu_model.parameters(), mlu_model.parameters()):
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=1e-6, atol=1e-7)
