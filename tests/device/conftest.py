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
    through a plugin of the test's own run, as a third party would; the run ends with the test
    and the built-in kernels are back."""
    from mluverify import hookimpl
    from mluverify.core.plugin_manager import configured_plugin_manager, register

    def install(op_name, fn):
        class Override:
            @hookimpl
            def mluverify_device_kernels(self, registry):
                registry.register(op_name, fn)

        register(pm, Override())  # a plugin registered during the run reaches the device at once

    with configured_plugin_manager(entry_points=False) as pm:
        yield install
