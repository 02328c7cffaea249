"""torch_mlu compatibility: the seeds' scripts run unchanged; a real torch_mlu is never shadowed."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The single-op examples of seeds/000 (conv, ReLU) and the add example of seeds/003, verbatim,
# followed by a check against the CPU computed independently in the same script.
SCRIPTS = {
    "conv": """
        import torch
        import torch_mlu
        import torch.nn as nn
        import torch_mlu.core.mlu_model as ct

        ct._jit_override_can_fuse_on_mlu(True)
        torch.set_grad_enabled(False)

        class Net(nn.Module):
            def __init__(self):
                super(Net, self).__init__()
                self.conv = nn.Conv2d(1, 1, 3)

            def forward(self, x):
                return self.conv(x)

        n = Net().eval().float()
        example_forward_input = torch.rand(1, 1, 3, 3)

        module = torch.jit.trace(n, example_forward_input)
        input = torch.randn((1,1,28,28), dtype=torch.float)
        input_mlu = input.to("mlu")
        module.to("mlu")
        out_mlu = module(input_mlu)
        out_cpu = out_mlu.cpu()
        assert out_mlu.device.type == "mlu"
        torch.testing.assert_close(out_cpu, n(input))
        print("OK conv", tuple(out_cpu.shape))
    """,
    "relu": """
        import torch
        import torch_mlu
        torch.set_grad_enabled(False)
        input = torch.randn(4,10,dtype=torch.float)
        relu = torch.nn.ReLU().float().eval()
        module = torch.jit.trace(relu, input)
        relu_mlu = module.to("mlu")
        out_mlu = relu_mlu(input.to("mlu"))
        out_cpu = out_mlu.cpu()
        assert torch.equal(out_cpu, input.clamp(min=0))
        print("OK relu", tuple(out_cpu.shape))
    """,
    "add": """
        import torch
        import torch_mlu.core.mlu_model as ct
        a = torch.rand((1,3,224,224), dtype=torch.float)
        b = torch.rand((1,3,224,224), dtype=torch.float)
        out_mlu = a.to(ct.mlu_device()) + b.to(ct.mlu_device())
        out_cpu = out_mlu.cpu()
        assert torch.equal(out_cpu, a + b)
        print("OK add", tuple(out_cpu.shape))
    """,
}


def _env(**extra):
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    return env


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_seed_scripts_run_unchanged_under_mluverify_exec(name, tmp_path):
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(SCRIPTS[name]))
    done = subprocess.run([sys.executable, "-m", "mluverify.cli", "exec", str(script)],
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
