"""The seeds' MNIST training script (examples/mnist_training/mnist.py) runs through
``mluverify exec`` unchanged but for its data loading: it trains, validates and saves the
seeds' checkpoint of device tensors. A quick run on 100 digits (the accuracy comparison is
examples/mnist_training/compare.py, an example, not a test)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "mnist_training" / "mnist.py"

pytestmark = pytest.mark.slow


def test_the_seed_training_script_runs_on_the_emulated_mlu(tmp_path):
    pytest.importorskip("sklearn", reason="the example's data: pip install '.[training]'")
    env = {**os.environ, "DIGITS_SAMPLES": "100"}
    done = subprocess.run([sys.executable, "-m", "mluverify.cli", "exec", str(SCRIPT)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"Train Epoch: 0 \[0/2000 \(0%\)\]\tLoss: \d+\.\d+", done.stdout), done.stdout
    assert re.search(r"Test set: Average loss: \d+\.\d+, Accuracy: \d+/20 ", done.stdout), done.stdout
    checkpoint = torch.load(tmp_path / "model.pth")
    assert checkpoint["epoch"] == 0 and set(checkpoint) == {"state_dict", "optimizer", "epoch"}
    assert checkpoint["state_dict"]["fc1.weight"].device.type == "mlu"
    assert int(checkpoint["state_dict"]["fc1.adaptive_step"]) == 32  # 2000 shifted digits / 64 per step
