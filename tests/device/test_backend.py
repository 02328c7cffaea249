"""The back end ``mlu`` (target ``mlu:cnnl``) through the same registry and hooks as any other."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from mluverify.core.backends import BackendRegistry
from mluverify.core.case import Case, Target
from mluverify.core.plugin_manager import call_hook, new_plugin_manager


@pytest.fixture
def backend():
    registry = BackendRegistry()
    call_hook(new_plugin_manager(), "mluverify_add_backends", registry=registry)
    _, found = registry.resolve("mlu:cnnl")
    return found


def _case(mode="cnnl", op="conv2d"):
    return Case(case_id="t", op=op, target=Target("mlu", mode))


def test_target_and_policy(backend):
    assert backend.unavailable_reason() is None
    assert backend.modes["cnnl"] == "cnnl" and backend.policy("cnnl") == "cnnl"
    with pytest.raises(ValueError, match="mode of back end 'mlu'.*'cnnl'"):
        backend.execute(torch.relu, (torch.ones(1),), {}, case=_case("fast"))


@pytest.mark.usefixtures("float_matmul")  # op semantics, not quantization
def test_execute_module_leaves_the_original_on_cpu_and_returns_cpu_output(backend):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU())
    x = torch.randn(1, 2, 6, 6)
    execution = backend.execute(module, (x,), {}, case=_case())
    assert next(module.parameters()).device.type == "cpu"
    assert execution.output.device.type == "cpu"
    torch.testing.assert_close(execution.output, module(x))
    assert execution.fallback_ops == ()


def test_execute_records_fallback_ops_in_order(backend):
    def fn(x):
        return torch.flip(torch.cumsum(x, 0), [0]) + torch.cumsum(x, 0)

    x = torch.arange(4.0)
    execution = backend.execute(fn, (x,), {}, case=_case(op="custom"))
    assert execution.fallback_ops == ("aten::cumsum.out", "aten::flip")
    assert torch.equal(execution.output, fn(x))


def test_a_new_mode_is_one_runner(backend):
    calls = []

    def runner(fn, args, kwargs, case):
        calls.append(case.mode)
        return fn(*(a.to("mlu") for a in args))

    backend.add_mode("probe", "exact", runner)
    out = backend.execute(torch.relu, (torch.tensor([-1.0, 1.0]),), {}, case=_case("probe"))
    assert calls == ["probe"] and backend.policy("probe") == "exact"
    assert torch.equal(out.output, torch.tensor([0.0, 1.0]))


def test_importing_mluverify_imports_neither_torch_nor_the_device():
    code = ("import sys, mluverify, mluverify.compat, mluverify.plugins.mlu_backend, "
            "mluverify.plugins.mlu_device, mluverify.cli.exec, mluverify.core.plugin_manager as p;"
            "p.unconfigure(p.new_plugin_manager(entry_points=False));"
            "print(sorted(m for m in ('torch', 'mluverify.device._backend') if m in sys.modules))")
    import os
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_device_package_exports_exactly_its_public_names():
    import types

    import mluverify.device as md

    public = {n for n in dir(md) if not n.startswith("_") and n != "annotations"
              and not isinstance(getattr(md, n), types.ModuleType)}
    assert set(md.__all__) == public
