"""The emulated device's state: the kernel mode is per context (a ContextVar) with one
process-wide default; kernel plugins registered late take effect through the historic hook;
TORCH_MIN_CNLOG_LEVEL=-1 shows the device's DEBUG lines."""
import asyncio
import os
import subprocess
import sys
import threading

import pytest
import torch

import mluverify.device as md
from mluverify import hookimpl
from mluverify.core.plugin_manager import configured_plugin_manager, register


@pytest.fixture
def default_mode():
    yield
    md.set_default_mode("cnnl")


def seen_in_thread() -> str:
    seen = []
    thread = threading.Thread(target=lambda: seen.append(md.active_mode()))
    thread.start()
    thread.join()
    return seen[0]


def test_a_kernel_mode_block_stays_in_its_thread():
    with md.kernel_mode("cnml"):
        assert md.active_mode() == "cnml"
        assert seen_in_thread() == "cnnl"
    assert md.active_mode() == "cnnl"


def test_concurrent_tasks_each_see_their_own_mode():
    async def task(mode, seen):
        with md.kernel_mode(mode):
            await asyncio.sleep(0)  # the other task runs its block meanwhile
            seen.append((mode, md.active_mode()))

    async def both():
        seen = []
        await asyncio.gather(task("cnml", seen), task("cnnl", seen))
        return seen

    assert sorted(asyncio.run(both())) == [("cnml", "cnml"), ("cnnl", "cnnl")]


class _ModeInBackward(torch.autograd.Function):
    """Records the mode active where autograd runs the backward (its device thread on mlu)."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        _ModeInBackward.seen.append((threading.get_ident(), md.active_mode()))
        return grad * 2


def mode_in_backward() -> tuple[bool, str]:
    _ModeInBackward.seen.clear()
    x = torch.ones(3, device="mlu", requires_grad=True)
    _ModeInBackward.apply(x).sum().backward()
    thread, mode = _ModeInBackward.seen[0]
    return thread != threading.get_ident(), mode


def test_the_default_mode_reaches_autograds_device_thread_a_block_does_not(default_mode):
    with md.kernel_mode("cnml"):
        other_thread, mode = mode_in_backward()
    assert other_thread and mode == "cnnl"
    md.set_default_mode("cnml")
    assert seen_in_thread() == "cnml"
    assert mode_in_backward() == (True, "cnml")
    with md.kernel_mode("cnnl"):  # a block still overrides the default where it runs
        assert md.active_mode() == "cnnl"


def test_an_unknown_mode_is_refused_naming_the_valid_ones(default_mode):
    with pytest.raises(ValueError, match="unknown kernel mode 'magic'; valid: 'cnml', 'cnnl'"):
        md.set_default_mode("magic")
    assert md.active_mode() == "cnnl"


class _DoublingRelu:
    """relu that doubles positive values: visibly not the built-in kernel."""

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::relu", lambda x: torch.relu(x) * 2, mode="cnnl")


def test_a_kernel_plugin_registered_late_takes_effect_without_a_reload():
    x = torch.tensor([-1.0, 2.0])
    with configured_plugin_manager(entry_points=False) as pm:
        assert torch.equal(torch.relu(x.to("mlu")).cpu(), torch.tensor([0.0, 2.0]))
        plugin = _DoublingRelu()
        register(pm, plugin)
        assert torch.equal(torch.relu(x.to("mlu")).cpu(), torch.tensor([0.0, 4.0]))
        pm.unregister(plugin)
        md.reload_kernels()  # drops the kernels of the plugin that left
        assert torch.equal(torch.relu(x.to("mlu")).cpu(), torch.tensor([0.0, 2.0]))
        register(pm, plugin)
    assert torch.equal(torch.relu(x.to("mlu")).cpu(), torch.tensor([0.0, 2.0]))


def test_a_conftest_kernel_plugin_found_while_collecting_reaches_the_device(pytester):
    pytester.makeconftest("import mluverify.device  # the device loads its kernels first")
    sub = pytester.mkdir("tests") / "sub"
    sub.mkdir()
    (sub / "conftest.py").write_text("""
import torch
from mluverify import hookimpl

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::relu", lambda x: torch.relu(x) * 2, mode="cnnl")
""")
    (sub / "test_relu.py").write_text("""
import torch

def test_relu_doubles():
    got = torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu()
    assert torch.equal(got, torch.tensor([0.0, 4.0]))
""")
    result = pytester.runpytest_subprocess("-p", "mluverify", "tests")
    result.assert_outcomes(passed=1)


COMPLEX_ADD_TWICE = """
import torch, mluverify.device
x = torch.ones(2, dtype=torch.complex64).to("mlu")
x + x
x + x
"""


@pytest.mark.parametrize(("level", "debug_shown"), [("-1", True), ("1", False), (None, False)])
def test_cnlog_level_minus_one_shows_debug_lines(level, debug_shown):
    env = {k: v for k, v in os.environ.items() if k != "TORCH_MIN_CNLOG_LEVEL"}
    if level is not None:
        env["TORCH_MIN_CNLOG_LEVEL"] = level
    out = subprocess.run([sys.executable, "-c", COMPLEX_ADD_TWICE], env=env, capture_output=True, text=True,
                         check=True)
    # the first fallback of an op is a warning, later ones are debug lines
    assert "aten::add.Tensor runs on the CPU" in out.stderr
    assert ("[CNLOG DEBUG] mluverify.device: aten::add.Tensor runs on the CPU" in out.stderr) is debug_shown


