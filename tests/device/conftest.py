"""Fixtures for the emulated-MLU tests: the device is registered once per test process."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import mluverify.device  # noqa: E402,F401  (registers the device)
from mluverify.device import mlu_model  # noqa: E402


@pytest.fixture
def core_version():
    """Select a core version for one test, restoring the previous one afterwards."""
    previous = mlu_model.get_core_version()
    yield mlu_model.set_core_version
    mlu_model.set_core_version(previous)


@pytest.fixture
def seeded():
    return torch.Generator().manual_seed(1234)


@pytest.fixture
def kernel_override():
    """``install(op_name, fn)`` registers ``fn`` as the MLU kernel of ``op_name`` for one test,
    through a plugin, as a third party would; the built-in kernels are back afterwards."""
    from mluverify import hookimpl
    from mluverify.core.plugin_manager import get_plugin_manager

    plugins = []

    def install(op_name, fn):
        class Override:
            @hookimpl
            def mluverify_device_kernels(self, registry):
                registry.register(op_name, fn)

        plugins.append(Override())
        get_plugin_manager().register(plugins[-1])
        mluverify.device.reload_kernels()

    yield install
    for plugin in plugins:
        get_plugin_manager().unregister(plugin)
    mluverify.device.reload_kernels()
