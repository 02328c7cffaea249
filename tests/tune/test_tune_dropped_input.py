"""Tuning a model whose exported program drops an input it never reads (``ShapeOfFirst``: one
read for its shape alone), on both int8 runtimes: calibration, the trials and the written
``test_tuned.py`` feed the model by its inputs' names, not by position (onnxruntime refused the
calibration feed, 'Invalid input name: input0'; OpenVINO's run refused a count mismatch), and
judge it as the model without that input."""
from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from mluverify.cli import main
from mluverify.tune import tune_runtime
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)
from tests.tune.test_tune_openvino import nncf_installed  # noqa: F401  (a fixture: skips without openvino and nncf)

SCRIPT = Path(__file__).with_name("shape_of_first_model.py")
BOUND = 0.02


@pytest.mark.parametrize("target, installed", [("ort:int8", "ort_available"), ("openvino:int8", "nncf_installed")])
def test_a_model_that_drops_an_input_it_never_reads_is_tuned_and_its_answer_passes_in_a_fresh_process(
        target, installed, request, tmp_path):
    request.getfixturevalue(installed)
    script = runpy.run_path(str(SCRIPT))
    calibration, (like, x) = script["calibration_inputs"](), script["eval_inputs"]()
    dropped = tune_runtime(target, script["model"](), calibration, (like, x), bound=BOUND, budget=2)
    body = tune_runtime(target, script["model"]().body, [batch[1] for batch in calibration], x, bound=BOUND,
                        budget=2)
    assert dropped.search.trials[0].metric == pytest.approx(body.search.trials[0].metric, rel=1e-6)
    out = tmp_path / "tuned"
    assert main(["tune", str(SCRIPT), "--target", target, "--out", str(out), "--budget", "2"]) == 0
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                          "--import-mode=importlib", str(out / "test_tuned.py")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert "1 passed" in ran.stdout, ran.stdout[-3000:]
