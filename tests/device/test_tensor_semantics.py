"""torch semantics on the ``mlu`` device, checked against the same operations on the CPU."""
from __future__ import annotations

import copy
import pickle

import pytest
import torch
from hypothesis import given, strategies as st

import mluverify.device as md


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                   torch.int64, torch.int8, torch.uint8, torch.bool])
def test_round_trip_is_bit_identical(dtype, seeded):
    x = (torch.randn(5, 7, generator=seeded) * 100).to(dtype)
    back = x.to("mlu").cpu()
    assert back.dtype == dtype and back.device.type == "cpu"
    assert torch.equal(back.view(torch.uint8) if dtype != torch.bool else back, x.view(torch.uint8) if dtype != torch.bool else x)


def test_round_trip_keeps_nan_payloads_and_non_contiguous_layout():
    x = torch.tensor([float("nan"), -0.0, float("inf"), 1e-45]).repeat(3, 1).t()
    back = x.to("mlu").cpu()
    assert torch.equal(back.contiguous().view(torch.int32), x.contiguous().view(torch.int32))


def test_device_identity_and_generated_methods():
    x = torch.ones(2).mlu()
    assert x.is_mlu and x.device == torch.device("mlu:0") and x.device.type == torch.device("mlu").type
    assert not torch.ones(2).is_mlu
    assert torch.accelerator.current_accelerator().type == "mlu"
    m = torch.nn.Linear(2, 2).mlu()
    assert m.weight.is_mlu


@pytest.mark.parametrize("factory, args", [
    (torch.zeros, (3, 4)), (torch.ones, (3, 4)), (torch.full, ((2, 3), 7.5)), (torch.arange, (10,)),
    (torch.eye, (4,)), (torch.empty, (0,)),
])
def test_factories_with_device_mlu(factory, args):
    got = factory(*args, device="mlu")
    assert got.device.type == "mlu"
    if factory is not torch.empty:
        assert torch.equal(got.cpu(), factory(*args))


def test_random_factory_follows_manual_seed():
    torch.manual_seed(7)
    got = torch.randn(4, 4, device="mlu").cpu()
    torch.manual_seed(7)
    assert torch.equal(got, torch.randn(4, 4))


VIEWS = {
    "t": lambda x: x.t(),
    "slice": lambda x: x[1:, ::2],
    "select": lambda x: x[2],
    "view": lambda x: x.view(-1),
    "permute_reshape": lambda x: x.reshape(4, 3, 2).permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 1),
    "expand": lambda x: x[:1].expand(5, 6),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "diagonal": lambda x: x.diagonal(),
    "narrow": lambda x: x.narrow(1, 2, 3),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_alias_and_in_place_writes_propagate_like_cpu(name, seeded):
    base = torch.randn(4, 6, generator=seeded)
    cpu, dev = base.clone(), base.to("mlu")
    cpu_view, dev_view = VIEWS[name](cpu), VIEWS[name](dev)
    assert dev_view.shape == cpu_view.shape and dev_view.stride() == cpu_view.stride()
    assert dev_view.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    if name != "expand":
        cpu_view.mul_(2).add_(1)
        dev_view.mul_(2).add_(1)
    assert torch.equal(dev.cpu(), cpu)
    assert torch.equal(dev_view.cpu(), cpu_view)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(0, 2), st.floats(-3, 3))
def test_in_place_add_through_a_slice_matches_cpu(shape, dim, value):
    x = torch.arange(float(torch.tensor(shape).prod())).reshape(shape)
    dim = dim % len(shape)
    dev = x.to("mlu")
    x.narrow(dim, 0, 1).add_(value)
    dev.narrow(dim, 0, 1).add_(value)
    assert torch.equal(dev.cpu(), x)


def test_half_and_dtype_casts():
    x = torch.randn(3, 3)
    assert torch.equal(x.to("mlu").half().cpu(), x.half())
    assert torch.equal(x.to("mlu").to(torch.int32).cpu(), x.to(torch.int32))


def test_state_dict_round_trip_and_load_then_move(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    moved = copy.deepcopy(model).to("mlu")
    state = moved.state_dict()
    assert all(v.device.type == "mlu" for v in state.values())
    path = tmp_path / "state.pt"
    torch.save(state, path)
    loaded_cpu = torch.load(path, map_location="cpu")
    loaded_mlu = torch.load(path, map_location="mlu")
    fresh = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    fresh.load_state_dict(loaded_cpu)
    fresh = fresh.to("mlu")
    for key, value in model.state_dict().items():
        assert torch.equal(loaded_mlu[key].cpu(), value) and loaded_mlu[key].device.type == "mlu"
        assert torch.equal(fresh.state_dict()[key].cpu(), value)


def test_deepcopy_and_pickle_copy_the_data():
    x = torch.randn(4, 5).to("mlu")
    for copied in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert copied.device.type == "mlu" and torch.equal(copied.cpu(), x.cpu())
        copied.add_(1)
        assert not torch.equal(copied.cpu(), x.cpu())


def test_printing_shows_values_and_device():
    text = repr(torch.tensor([1.5, -2.0]).to("mlu"))
    assert "1.5000" in text and "-2.0000" in text and "device='mlu:0'" in text


@pytest.mark.usefixtures("float_matmul")  # op semantics, not quantization
def test_autograd_through_device_kernels_matches_cpu(seeded):
    conv = torch.nn.Conv2d(2, 3, 3)
    x = torch.randn(1, 2, 6, 6, generator=seeded, requires_grad=True)
    conv_mlu = copy.deepcopy(conv).to("mlu")
    x_mlu = x.detach().to("mlu").requires_grad_()
    torch.relu(conv(x)).pow(2).sum().backward()
    torch.relu(conv_mlu(x_mlu)).pow(2).sum().backward()
    torch.testing.assert_close(x_mlu.grad.cpu(), x.grad)
    torch.testing.assert_close(conv_mlu.weight.grad.cpu(), conv.weight.grad)
    torch.testing.assert_close(conv_mlu.bias.grad.cpu(), conv.bias.grad)


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: torch.mm(a, b), lambda a, b: torch.cat([a, b]),
    lambda a, b: a.add_(b),
])
def test_mixing_devices_raises_like_a_real_device(fn):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*mlu:0 and cpu"):
        fn(torch.ones(3, 3).to("mlu"), torch.ones(3, 3))


def test_zero_dim_cpu_scalar_mixes_like_cuda():
    got = torch.ones(3).to("mlu") * torch.tensor(2.0)
    assert got.device.type == "mlu" and torch.equal(got.cpu(), torch.full((3,), 2.0))


def test_resize_and_out_variants():
    out = torch.empty(0, device="mlu")
    torch.add(torch.ones(2, 3).to("mlu"), 1, out=out)
    assert out.shape == (2, 3) and torch.equal(out.cpu(), torch.full((2, 3), 2.0))
    out.resize_(10)
    assert out.shape == (10,) and torch.equal(out[:6].cpu(), torch.full((6,), 2.0))


def test_as_cpu_aliases_and_wrap_cpu_adopts_without_copy():
    x = torch.zeros(2, 3).to("mlu")
    alias = md.as_cpu(x[:, 1:])
    assert alias.device.type == "cpu" and alias.shape == (2, 2)
    alias.fill_(5)
    md.mark_written(x)
    assert torch.equal(x.cpu(), torch.tensor([[0.0, 5, 5], [0, 5, 5]]))
    source = torch.arange(6.0).reshape(2, 3).t()
    wrapped = md.wrap_cpu(source)
    assert wrapped.device.type == "mlu" and wrapped.stride() == source.stride()
    assert md.as_cpu(wrapped).data_ptr() == source.data_ptr()
    with pytest.raises(ValueError, match="CPU tensor"):
        md.wrap_cpu(wrapped)
    with pytest.raises(ValueError, match="no mluverify device buffer"):
        md.as_cpu(torch.ones(1, device="meta"))


def test_buffer_version_tracks_device_writes_through_any_path():
    x = torch.zeros(4).to("mlu")
    serial, start = md.buffer_version(md.as_cpu(x))
    x.add_(1)                       # a kernel
    torch.cumsum(x, 0, out=x[:0])   # a fallback writing (nothing) through an out= view
    x.copy_(torch.ones(4))          # a copy from the CPU
    assert md.buffer_version(md.as_cpu(x[1:])) == (serial, start + 3)
    assert md.buffer_version(torch.zeros(4)) is None
    copy_of_x = x.clone()
    assert md.buffer_version(md.as_cpu(copy_of_x))[0] != serial


def test_conjugate_and_negative_views_copy_with_their_bits():
    # Copying a conjugate view recursed inside torch until the process died (SIGSEGV).
    z = torch.tensor([1 + 2j, -3 - 0.5j], dtype=torch.complex64)
    on_device = z.to("mlu").conj()
    assert on_device.is_conj()
    assert torch.equal(on_device.cpu(), z.conj()) and torch.equal(on_device.clone().cpu(), z.conj())
    target = torch.zeros(2, dtype=torch.complex64).to("mlu").conj()
    target.copy_(z.to("mlu"))  # writing through a conjugate view stores the conjugates
    assert torch.equal(target.resolve_conj().cpu(), z)
    x = torch.tensor([1.5, -2.0])
    assert torch.equal(x.to("mlu")._neg_view().cpu(), -x)
    assert torch.equal(torch.fft.hfft(z.to("mlu")).cpu(), torch.fft.hfft(z))
