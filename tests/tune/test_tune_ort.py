"""``mluverify tune --target ort:int8``: onnxruntime's own quantizer, the answer its
``nodes_to_exclude``. A planted bad layer (``ort_planted_model.py``: 300x weights in one input
channel of ``conv3``) is the one kept in float; the written answer passes in a fresh process and
the untuned one fails there; onnxruntime's session re-quantizes an excluded node unless its
``WeightBiasQuantization`` optimizer is off; bad input is exit 2 naming it."""
from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mluverify import Task, TaskBudget, compare
from mluverify.cli import main
from mluverify.plugins._int8 import has_vnni
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)

PLANTED_SCRIPT = Path(__file__).with_name("ort_planted_model.py")
PLANTED_NODE = "/fn/conv3/Conv"
BOUND = 0.02


@pytest.fixture(scope="module")
def planted():
    return runpy.run_path(str(PLANTED_SCRIPT))


def test_the_planted_layer_is_the_one_kept_in_float_and_the_answer_passes_in_a_fresh_process(
        ort_available, tmp_path, capsys):
    out = tmp_path / "tuned"
    assert main(["tune", str(PLANTED_SCRIPT), "--target", "ort:int8", "--out", str(out), "--budget", "8"]) == 0
    assert f"with 1 change: {PLANTED_NODE} -> float" in capsys.readouterr().out
    arguments = json.loads((out / "quantize_static.json").read_text())
    assert arguments == {"quant_format": "QDQ", "per_channel": False, "activation_type": "QInt8",
                         "weight_type": "QInt8", "reduce_range": not has_vnni(), "nodes_to_exclude": [PLANTED_NODE]}
    assert json.loads((out / "session.json").read_text()) == {"disabled_optimizers": ["WeightBiasQuantization"]}
    assert "ranked prefix" in (out / "tune.html").read_text()
    untuned = tmp_path / "untuned"
    shutil.copytree(out, untuned)
    (untuned / "quantize_static.json").write_text(json.dumps({**arguments, "nodes_to_exclude": []}))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                          "--import-mode=importlib", str(out / "test_tuned.py"), str(untuned / "test_tuned.py")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "1 failed, 1 passed" in ran.stdout, ran.stdout[-3000:]
    assert "PASSED tuned/test_tuned.py" in ran.stdout and "FAILED untuned/test_tuned.py" in ran.stdout


def test_onnxruntime_quantizes_an_excluded_nodes_weights_again_unless_weight_bias_quantization_is_off(
        ort_available, planted):
    """The finding behind ``session.json``: ``nodes_to_exclude`` keeps conv3's weights in float in
    the saved model, but a default session's ``WeightBiasQuantization`` quantizes them per tensor
    again (its input comes from a DequantizeLinear), and the planted outliers ruin it as before."""
    import onnx
    import onnxruntime

    from mluverify.plugins.ort_int8_backend import session_feeds
    from mluverify.tune._ort import OrtInt8Runtime

    runtime = OrtInt8Runtime(planted["model"](), planted["calibration_inputs"](), (planted["eval_inputs"](),), {})
    path = runtime._quantize([PLANTED_NODE])
    conv3 = next(node for node in onnx.load(str(path)).graph.node if node.name == PLANTED_NODE)
    assert conv3.input[1] == "fn.conv3.weight"  # the float initializer, not a DequantizeLinear output
    expected = planted["model"]()(planted["eval_inputs"]()).detach()

    def output(**options):
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"], **options)
        return torch.cat([torch.from_numpy(session.run(None, feed)[0]) for feed in session_feeds(session, runtime.samples)])

    assert compare(output(), expected, mode="cnml", tolerance=BOUND).value > BOUND
    kept_float = output(disabled_optimizers=["WeightBiasQuantization"])
    assert compare(kept_float, expected, mode="cnml", tolerance=BOUND).passed


def test_a_task_objective_keeps_the_planted_layer_too(ort_available, planted):
    from mluverify.tune import tune_runtime

    images = torch.randn(400, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    task = Task("top1_agreement", reference=0.99, budget=TaskBudget(effect_share=0.05))
    result = tune_runtime("ort:int8", planted["model"](), planted["calibration_inputs"](), images, bound=BOUND,
                          budget=8, task=task)
    assert result.changes == {f"layer:{PLANTED_NODE}": "float"}, result.message
    assert result.search.trials[0].passed is False  # the untuned model misses the gate
    assert result.task["samples"] == 400


@pytest.mark.parametrize("arguments, message", [
    (["--start", "START"], "the starting config's nodes_to_exclude names '/fn/conv9/Conv', not a layer ort:int8 "
                           "quantizes in the model; closest: '/fn/conv4/Conv', '/fn/conv3/Conv'"),
    (["--scheme", "s4s4"], "unknown ort:int8 quantization scheme 's4s4'; valid: 's8s8', 'u8s8'"),
    (["--granularity", "per-row"], "unknown ort:int8 quantization granularity 'per-row'; valid: 'per-channel', "
                                   "'per-tensor'"),
    (["--granularity", "per-channel"], "ort:int8 per-channel quantization needs at least 19 calibration samples, "
                                       "the calibration set has 16: give 3 more"),
    (["--dtype", "int16"], "ort:int8 quantizes to int8 and keeps layers in float: --dtype int16"),
    (["--mode", "training"], "ort:int8 tunes inference"),
])
def test_bad_input_is_exit_2_naming_it_and_writes_nothing(ort_available, tmp_path, capsys, arguments, message):
    start = tmp_path / "start.json"
    start.write_text(json.dumps({"nodes_to_exclude": ["/fn/conv9/Conv"]}))
    out = tmp_path / "out"
    arguments = [str(start) if a == "START" else a for a in arguments]
    assert main(["tune", str(PLANTED_SCRIPT), "--target", "ort:int8", "--out", str(out), *arguments]) == 2
    assert f"mluverify tune: error: {message}" in capsys.readouterr().err
    assert not out.exists()


def test_runtime_options_on_the_emulator_are_exit_2(tmp_path, capsys):
    assert main(["tune", str(PLANTED_SCRIPT), "--scheme", "u8s8", "--out", str(tmp_path / "out")]) == 2
    assert "--scheme set(s) an int8 runtime's quantizer; mlu:cnml takes --dtype" in capsys.readouterr().err
