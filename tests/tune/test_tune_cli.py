"""``mluverify tune``: the written qconfig and fallback setting reproduce the passing run in a
fresh process (the generated pytest case), and bad input is exit 2 naming the culprit,
writing nothing."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from mluverify.cli import main
from pathlib import Path

TOY_SCRIPT = Path(__file__).with_name("toy_model.py")


def test_the_written_answer_reproduces_the_passing_run_in_a_fresh_process(tmp_path, capsys):
    out = tmp_path / "tuned"
    assert main(["tune", str(TOY_SCRIPT), "--out", str(out), "--budget", "12"]) == 0
    assert "with 2 changes: fc2 -> int16, fc4 -> int16" in capsys.readouterr().out
    assert json.loads((out / "qconfig.json").read_text())["layers"] == {"fc2": "int16", "fc4": "int16"}
    assert (out / "fallback.env").read_text() == "DEBUG_FORCED_FALLBACK_OPS=\n"
    page = (out / "tune.html").read_text()
    assert "ranked prefix" in page and "within bound" in page
    training = tmp_path / "training"
    assert main(["tune", str(TOY_SCRIPT), "--mode", "training", "--out", str(training), "--budget", "12"]) == 0
    assert json.loads((training / "bits.json").read_text())["layers"]  # 8 bits everywhere breaks the bound
    task = tmp_path / "task"
    assert main(["tune", str(_many_samples_script(tmp_path)), "--target", "mlu:cnnl", "--out", str(task),
                 "--task", "top1_agreement:0.99:0.05"]) == 0
    assert "(1 - top1_agreement" in capsys.readouterr().out
    assert json.loads((task / "qconfig.json").read_text())["layers"] == {"fc2": "int16", "fc4": "int16"}
    # the same generated cases with the untuned settings (every layer int8 / 8 bits) must fail
    untuned = _untuned(out, tmp_path / "untuned", "qconfig.json", {"layers": {}, "iteration": 2})
    untuned_training = _untuned(training, tmp_path / "untuned_training", "bits.json",
                                {"bitwidth": 8, "steps_per_epoch": 1, "layers": {}})
    untuned_task = _untuned(task, tmp_path / "untuned_task", "qconfig.json", {"layers": {}, "iteration": 2})
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                          "--import-mode=importlib", *(str(d / "test_tuned.py") for d in
                                                       (out, training, task, untuned, untuned_training,
                                                        untuned_task))],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "3 failed, 3 passed" in ran.stdout, ran.stdout[-3000:]
    for passing in ("tuned", "training", "task"):
        assert f"PASSED {passing}/test_tuned.py" in ran.stdout
    for failing in ("untuned", "untuned_training", "untuned_task"):
        assert f"FAILED {failing}/test_tuned.py" in ran.stdout
    assert "task top1_agreement" in ran.stdout  # the task gate, not rel_mse, failed the untuned task case


def _many_samples_script(directory: Path) -> Path:
    """The toy judged on 400 samples (enough for a top-1 gate sized for a 5 % drop)."""
    script = directory / "toy_400.py"
    script.write_text(f"import runpy\nimport torch\ntoy = runpy.run_path({str(TOY_SCRIPT)!r})\n"
                      "model, calibration_inputs = toy['model'], toy['calibration_inputs']\n"
                      "def eval_inputs():\n"
                      "    return torch.randn(400, 32, generator=torch.Generator().manual_seed(5))\n")
    return script


def _untuned(tuned, directory, name, setting):
    shutil.copytree(tuned, directory)
    (directory / name).write_text(json.dumps(setting))
    return directory


@pytest.mark.parametrize("arguments, message", [
    (["--budget", "0"], "the trial budget must be an integer >= 1, got 0"),
    (["--budget", "-2"], "the trial budget must be an integer >= 1, got -2"),
    (["--start", "START"], "the starting config names 'fc7', not layers or fused ops of the model"),
    (["--task", "top1_agreement:0.99"], "the judged batch: task top1_agreement: 16 samples are too few for its error budget"),
    (["--task", "top1_agreement:high"], "--task 'top1_agreement:high': expected METRIC:REFERENCE[:EFFECT]"),
    (["--task", "top5:0.9"], "task metric 'top5' is unknown; valid: accuracy, top1_agreement"),
    (["--task", "accuracy:0.9"], "--task accuracy needs the true labels: model script"),
    (["--task", "top1_agreement:0.9", "--bound", "0.01"], "--task and --bound exclude each other"),
    (["--task", "top1_agreement:0.9", "--mode", "training"], "--task judges inference"),
])
def test_bad_input_is_exit_2_naming_it_and_writes_nothing(tmp_path, capsys, arguments, message):
    start = tmp_path / "start.json"
    start.write_text(json.dumps({"layers": {"fc7": "int16"}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "qconfig.json").write_text("kept")
    arguments = [str(start) if a == "START" else a for a in arguments]
    assert main(["tune", str(TOY_SCRIPT), "--out", str(out), "--target", "mlu:cnnl", *arguments]) == 2
    assert f"mluverify tune: error: {message}" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["qconfig.json"] and (out / "qconfig.json").read_text() == "kept"


def test_a_script_without_the_names_is_exit_2_naming_them(tmp_path, capsys):
    script = tmp_path / "half.py"
    script.write_text("def model():\n    return None\n")
    assert main(["tune", str(script), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "defines no calibration_inputs(), eval_inputs()" in err
    assert not (tmp_path / "out").exists()


def test_the_script_imports_the_modules_beside_it(tmp_path, capsys):
    """As ``python script.py`` (and ``mluverify exec`` / ``capture``): its folder is on sys.path
    while the command runs, and taken off after."""
    shutil.copy(TOY_SCRIPT, tmp_path / "tune_sibling_toy.py")
    script = tmp_path / "uses_sibling.py"
    script.write_text("def model():\n    from tune_sibling_toy import model\n    return model()\n\n"
                      "from tune_sibling_toy import calibration_inputs, eval_inputs\n")
    assert main(["tune", str(script), "--out", str(tmp_path / "out"), "--target", "mlu:cnnl", "--budget", "2"]) in (0, 1)
    assert (tmp_path / "out" / "qconfig.json").is_file(), capsys.readouterr().err
    assert str(tmp_path) not in sys.path


@pytest.mark.parametrize("source, where", [
    ("import torch\n1 / 0\n", "ZeroDivisionError: division by zero (running it, line 2)"),
    ("def model():\n    raise RuntimeError('no weights here')\n"
     "def calibration_inputs():\n    return []\n"
     "def eval_inputs():\n    return None\n", "RuntimeError: no weights here (model(), line 2)"),
])
def test_a_script_that_raises_is_exit_2_naming_it_without_a_traceback(tmp_path, capsys, source, where):
    script = tmp_path / "broken.py"
    script.write_text(source)
    assert main(["tune", str(script), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"mluverify tune: error: model script {str(script)!r} raised {where}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
