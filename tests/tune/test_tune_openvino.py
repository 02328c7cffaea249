"""``mluverify tune --target openvino:int8``: NNCF's quantizer, the answer its ``IgnoredScope``
names. The planted bad layer of ``ort_planted_model.py`` (300x weights in one dead input channel
of ``conv3``) is the one kept in float (per-tensor weights: per channel, the outliers would only
ruin their own channels' scales); the written answer passes in a fresh process and the untuned
one fails there. Skips with the install line without openvino and nncf (``mluverify[openvino-int8]``)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mluverify.cli import main

PLANTED_SCRIPT = Path(__file__).with_name("ort_planted_model.py")
PLANTED_NODE = "convolution_2/aten.convolution.default/Convolution"  # conv3, the third convolution


@pytest.fixture
def nncf_installed() -> None:
    missing = [name for name in ("openvino", "nncf") if importlib.util.find_spec(name) is None]
    if missing and os.environ.get("CI") == "true" and importlib.util.find_spec("openvino"):
        pytest.fail(f"openvino:int8 is installed but cannot run: {', '.join(missing)} missing")
    if missing:
        pytest.skip(f"openvino:int8 unavailable: {', '.join(missing)} not installed; "
                    f"pip install 'mluverify[openvino-int8]'")


def test_the_planted_layer_is_the_one_nncf_keeps_in_float_and_the_answer_passes_in_a_fresh_process(
        nncf_installed, tmp_path, capsys):
    out = tmp_path / "tuned"
    assert main(["tune", str(PLANTED_SCRIPT), "--target", "openvino:int8", "--granularity", "per-tensor",
                 "--out", str(out), "--budget", "6"]) == 0
    assert f"with 1 change: {PLANTED_NODE} -> float" in capsys.readouterr().out
    assert json.loads((out / "ignored_scope.json").read_text()) == {"names": [PLANTED_NODE]}
    untuned = tmp_path / "untuned"
    shutil.copytree(out, untuned)
    (untuned / "ignored_scope.json").write_text(json.dumps({"names": []}))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                          "--import-mode=importlib", str(out / "test_tuned.py"), str(untuned / "test_tuned.py")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert "1 failed, 1 passed" in ran.stdout, ran.stdout[-3000:]
    assert "PASSED tuned/test_tuned.py" in ran.stdout and "FAILED untuned/test_tuned.py" in ran.stdout


def test_an_option_nncf_does_not_take_is_exit_2_naming_the_choices(nncf_installed, tmp_path, capsys):
    assert main(["tune", str(PLANTED_SCRIPT), "--target", "openvino:int8", "--scheme", "u8s8",
                 "--out", str(tmp_path / "out")]) == 2
    assert "unknown openvino:int8 quantizer option 'scheme'; valid: 'granularity', 'preset'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
