"""The kernel registry and the hook: built-ins are overridable exactly like third-party kernels."""
from __future__ import annotations

import pytest
import torch

import mluverify.device as md
from mluverify import hookimpl
from mluverify.device.kernels import KernelRegistry
from mluverify.errors import InvalidArgument
from mluverify.core.plugin_manager import configured_plugin_manager


class _DoublingRelu:
    """A third-party plugin overriding the built-in relu (and recording what it received)."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def mluverify_device_kernels(self, registry):
        def relu(x):
            self.seen.append((x.device.type, x.shape))
            return torch.relu(x) * 2

        registry.register("aten::relu", relu)


@pytest.fixture
def run_with_plugin():
    """A run whose plugin manager holds the plugin, handed to the device for the test."""
    plugin = _DoublingRelu()
    with configured_plugin_manager([plugin], entry_points=False) as pm:
        yield pm, plugin


@pytest.fixture
def plugin(run_with_plugin):
    return run_with_plugin[1]


def test_third_party_kernel_overrides_builtin_and_gets_cpu_aliases(plugin):
    x = torch.tensor([-1.0, 2.0]).to("mlu")
    got = torch.relu(x)
    assert got.device.type == "mlu" and torch.equal(got.cpu(), torch.tensor([0.0, 4.0]))
    assert plugin.seen == [("cpu", torch.Size([2]))]


def test_builtin_kernel_is_back_after_the_plugin_leaves(run_with_plugin):
    pm, plugin = run_with_plugin
    pm.unregister(plugin)
    md.reload_kernels()
    assert torch.equal(torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu(), torch.tensor([0.0, 2.0]))


def test_builtin_kernel_is_back_after_the_run_ends():
    with configured_plugin_manager([_DoublingRelu()], entry_points=False):
        assert torch.equal(torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu(), torch.tensor([0.0, 4.0]))
    assert torch.equal(torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu(), torch.tensor([0.0, 2.0]))


def test_builtin_set_is_installed_by_the_device_itself():
    registry = md.kernel_registry()
    for op in ("aten::convolution_overrideable", "aten::addmm", "aten::add.Tensor", "aten::_softmax",
               "aten::native_layer_norm", "aten::max_pool2d_with_indices", "aten::index_select"):
        assert op in registry, op


def test_kernel_mode_selects_mode_kernels_with_cnnl_default():
    registry = KernelRegistry()
    registry.register("aten::relu", torch.relu)
    marker = lambda x: x  # noqa: E731
    registry.register("relu", marker, mode="cnml")
    assert registry.kernel("aten::relu", "cnml") is marker
    assert registry.kernel("aten::relu", "cnnl") is torch.relu
    assert registry.kernel("aten::sigmoid", "cnml") is None
    with md.kernel_mode("cnml"):
        assert md.active_mode() == "cnml"
    assert md.active_mode() == "cnnl"


def test_registering_bad_names_modes_and_kernels_fails_clearly():
    registry = KernelRegistry()
    with pytest.raises(InvalidArgument, match="no ATen operator 'aten::not_an_op'"):
        registry.register("aten::not_an_op", torch.relu)
    with pytest.raises(InvalidArgument, match="kernel mode 'fused'.*'cnml', 'cnnl'"):
        registry.register("aten::relu", torch.relu, mode="fused")
    with pytest.raises(InvalidArgument, match="must be callable"):
        registry.register("aten::relu", 3)
    with pytest.raises(ValueError, match="kernel mode"):
        with md.kernel_mode("magic"):
            pass


@pytest.mark.usefixtures("float_matmul")  # op semantics, not quantization
def test_kernels_are_callable_directly_on_cpu_tensors():
    conv = md.kernel_registry().kernel("aten::convolution_overrideable")
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    got = conv(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    torch.testing.assert_close(got, torch.nn.functional.conv2d(x, w))


@torch.library.custom_op("mluverify_test::scaled", mutates_args=(), device_types="cpu")
def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class _ScaledOnDevice:
    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("mluverify_test::scaled", lambda x: x * 3)


def test_custom_op_in_its_own_namespace_gets_its_device_kernel():
    with configured_plugin_manager([_ScaledOnDevice()], entry_points=False):
        x = torch.ones(2)
        with md.track_fallbacks() as fb:
            got = torch.ops.mluverify_test.scaled(x.to("mlu"))
        assert fb.ops == () and torch.equal(got.cpu(), x * 3)
        assert torch.equal(torch.ops.mluverify_test.scaled(x), x * 2)
    with md.track_fallbacks() as fb:
        got = torch.ops.mluverify_test.scaled(torch.ones(2).to("mlu"))
    assert fb.ops == ("mluverify_test::scaled",) and torch.equal(got.cpu(), torch.full((2,), 2.0))
