"""torch_mlu compatibility: the seeds' scripts run unchanged; a real torch_mlu is never shadowed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SEED_SCRIPTS = REPO / "tests" / "seed_scripts"

# The seeds' single-op examples (000: conv, ReLU) and the add example (003), run unchanged by a
# wrapper under `mluverify exec`, then checked against the CPU computed independently.
CHECKS = {
    "conv_single_op.py": """
from mluverify.judge import compare
assert seed["out_mlu"].device.type == "mlu"
# MLU270 quantizes the conv's input and weight (int16): within the fused (cnml) bound.
verdict = compare(seed["out_cpu"], seed["n"](seed["input"]), mode="cnml")
assert verdict.passed and verdict.value > 0, verdict.reason
""",
    "relu_single_op.py": """
assert torch.equal(seed["out_cpu"], seed["input"].clamp(min=0))
""",
    "add.py": """
assert torch.equal(seed["out_cpu"], seed["a"] + seed["b"])
""",
}


def _env(**extra):
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    return env


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_seed_scripts_run_unchanged_under_mluverify_exec(name, tmp_path):
    wrapper = tmp_path / "run_seed.py"
    wrapper.write_text(f"import runpy, torch\nseed = runpy.run_path({str(SEED_SCRIPTS / name)!r})\n"
                       + CHECKS[name] + f"print('OK {name}')\n")
    done = subprocess.run([sys.executable, "-m", "mluverify.cli", "exec", str(wrapper)],
                          capture_output=True, text=True, env=_env(), timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"OK {name}" in done.stdout


def test_exec_passes_argv_and_exit_code(tmp_path):
    script = tmp_path / "args.py"
    script.write_text("import sys, torch_mlu.core.mlu_model as ct\nprint(sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n")
    done = subprocess.run([sys.executable, "-m", "mluverify.cli", "exec", str(script), "3", "--flag"],
                          capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 3 and "['3', '--flag']" in done.stdout


def test_exec_missing_script_is_a_clear_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mluverify.cli", "exec", str(tmp_path / "nope.py")],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_real_torch_mlu_is_never_shadowed(tmp_path):
    fake = tmp_path / "site" / "torch_mlu"
    (fake / "core").mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    (fake / "core" / "__init__.py").write_text("")
    (fake / "core" / "mlu_model.py").write_text("WHO = 'real'\n")
    code = ("import mluverify.compat as c; print(c.install());"
            "import torch_mlu, torch_mlu.core.mlu_model as ct; print(torch_mlu.REAL, ct.WHO)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{REPO}"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "real"]


def test_aliases_resolve_lazily_and_a_missing_target_names_both(monkeypatch):
    from mluverify import compat

    monkeypatch.setitem(compat.ALIASES, "torch_mlu.core.mlu_quantize", "mluverify.device.no_such_module")
    compat.install()
    try:
        import torch_mlu.core.mlu_model as ct
        from mluverify.device import mlu_model

        assert ct is mlu_model
        with pytest.raises(ImportError, match="torch_mlu.core.mlu_quantize is emulated by mluverify.device.no_such_module"):
            import torch_mlu.core.mlu_quantize  # noqa: F401
    finally:
        compat.uninstall()
    assert "torch_mlu" not in sys.modules


@pytest.mark.parametrize("alias, target", [
    ("torch_mlu.core.mlu_model", "mluverify.device.mlu_model"),
    ("torch_mlu.core.mlu_quantize", "mluverify.device.quantization"),
    ("torch_mlu.core.dumptool", "mluverify.dump"),
])
def test_each_alias_is_the_mluverify_module(alias, target):
    import importlib

    from mluverify import compat

    compat.install()
    try:
        assert importlib.import_module(alias) is importlib.import_module(target)
        import torch_mlu

        assert torch_mlu.core.mlu_model is importlib.import_module("mluverify.device.mlu_model")
    finally:
        compat.uninstall()
