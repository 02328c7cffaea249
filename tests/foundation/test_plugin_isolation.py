"""A plugin manager per run: two pytest runs in one process see only their own plugins, and the
emulated device works with no plugin manager in the process at all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mluverify import hookimpl
from mluverify.core.plugin_manager import configured_plugin_manager, register
from mluverify.errors import PluginError

REPO = Path(__file__).resolve().parents[2]

# A third-party plugin with a core hook (a metric) and a device hook (a relu that doubles).
METRIC_AND_KERNEL = """
import torch
from mluverify import hookimpl

@hookimpl
def mluverify_metrics():
    return {"always_seven": lambda actual, expected: 7.0}

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::relu", lambda x: torch.relu(x) * 2)
"""

# What a test sees of its run: the metrics the run's plugins add, and relu on the device.
SEEN = """
import json
import json
import os

import torch
import mluverify.device
from mluverify.pytest_plugin.plugin import plugin_manager

def test_record_what_this_run_sees(request):
    metrics = sorted(name for answer in plugin_manager(request.config).hook.mluverify_metrics()
                     for name in answer)
    relu = torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu().tolist()
    with open(os.environ["SEEN_FILE"], "a") as seen:
        seen.write(json.dumps({"metrics": metrics, "relu": relu}) + "\\n")
"""

# Three runs in one process: with the plugin, without it, with it again; then the device alone.
THREE_RUNS = """
import json, sys
import pytest
import torch

codes = [pytest.main(["-q", "-p", "no:cacheprovider", *plugin, "test_seen.py"])
         for plugin in (["-p", "metric_and_kernel"], [], ["-p", "metric_and_kernel"])]
after = torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu().tolist()
print(json.dumps({"codes": [int(code) for code in codes], "after": after}))
"""


def test_two_pytest_runs_in_one_process_see_only_their_own_plugins(tmp_path):
    (tmp_path / "metric_and_kernel.py").write_text(METRIC_AND_KERNEL)
    (tmp_path / "test_seen.py").write_text(SEEN)
    seen_file = tmp_path / "seen.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "SEEN_FILE": str(seen_file)}
    done = subprocess.run([sys.executable, "-c", THREE_RUNS], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["codes"] == [0, 0, 0], done.stdout[-3000:]
    runs = [json.loads(line) for line in seen_file.read_text().splitlines()]
    with_plugin = {"metrics": ["always_seven"], "relu": [0.0, 4.0]}
    assert runs == [with_plugin, {"metrics": [], "relu": [0.0, 2.0]}, with_plugin]
    assert result["after"] == [0.0, 2.0]  # the last run ended: the device is back to its own kernels


DEVICE_ALONE = """
import json, sys
import torch
import mluverify.device as md
from mluverify.device import fuse, fusion_summary
from mluverify.device.quantization import MLULinear, quantize_dynamic_mlu

x = torch.tensor([[-1.0, 0.5, 2.0]])
relu = torch.relu(x.to("mlu")).cpu().tolist()
model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()).eval()
with torch.no_grad():
    fused_model = fuse(model.to("mlu"), (x.to("mlu"),))
    fused_model(x.to("mlu"))
    quantized = quantize_dynamic_mlu(torch.nn.Sequential(torch.nn.Linear(3, 2)).eval(), gen_quant=True)
    quantized(x)
    quantized_out = quantized.to("mlu")(x.to("mlu")).cpu()
print(json.dumps({
    "relu": relu,
    "fused": fusion_summary(fused_model).executed_as,
    "quantized_class": type(quantized[0]).__name__,
    "quantized_finite": bool(torch.isfinite(quantized_out).all()),
    "loaded": sorted(m for m in sys.modules if m == "mluverify.core.plugin_manager"
                     or m.startswith("mluverify.plugins")),
}))
"""


def test_the_device_runs_with_no_plugin_manager_in_the_process():
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(DEVICE_ALONE)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"relu": [[0.0, 0.5, 2.0]], "fused": "fused", "quantized_class": "MLULinear",
                      "quantized_finite": True, "loaded": []}


class _ScaledRelu:
    """A device-kernel plugin: relu times ``factor``."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    @hookimpl
    def mluverify_device_kernels(self, registry):
        import torch

        registry.register("aten::relu", lambda x: torch.relu(x) * self.factor)


class _BrokenKernels:
    @hookimpl
    def mluverify_device_kernels(self, registry):
        raise RuntimeError("no licence")


def _relu_on_device() -> list[float]:
    import torch

    return torch.relu(torch.tensor([-1.0, 2.0]).to("mlu")).cpu().tolist()


def test_of_two_kernel_plugins_the_one_registered_later_wins():
    pytest.importorskip("torch")
    with configured_plugin_manager([_ScaledRelu(2), _ScaledRelu(3)], entry_points=False) as pm:
        assert _relu_on_device() == [0.0, 6.0]
        register(pm, _ScaledRelu(5))  # registered during the run: handed to the device at once
        assert _relu_on_device() == [0.0, 10.0]
    assert _relu_on_device() == [0.0, 2.0]


def test_a_kernel_plugin_that_raises_is_named_and_the_device_keeps_its_own():
    pytest.importorskip("torch")
    with pytest.raises(PluginError, match=r"plugin '.*' raised in hook mluverify_device_kernels: "
                                          r"RuntimeError: no licence"):
        with configured_plugin_manager([_BrokenKernels()], entry_points=False):
            pass  # pragma: no cover
    assert _relu_on_device() == [0.0, 2.0]
