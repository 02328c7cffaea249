"""The core imports only what it needs; the pytest plugin is reached by its entry point, and
`-p mluverify` still works where the entry point is not installed."""
import json
import subprocess
import sys

import mluverify

CORE = ("mluverify", "mluverify.judge", "mluverify.report", "mluverify.report.records",
        "mluverify.report.gate", "mluverify.report.rundir", "mluverify.core.case", "mluverify.core.backends",
        "mluverify.core.pipeline", "mluverify.core.config", "mluverify.core.hookspecs", "mluverify.core.plugin_manager",
        "mluverify.cli")

LOADED = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in ("pytest", "_pytest", "torch", "pandas", "pyarrow") if m in sys.modules)))
"""

# pluggy finds pytest11 entry points through importlib.metadata.distributions(): hide ours
WITHOUT_ENTRY_POINT = """
import importlib.metadata as metadata, sys
everything = metadata.distributions
metadata.distributions = lambda **kw: (d for d in everything(**kw) if d.metadata["Name"] != "mluverify")
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_the_core_imports_neither_pytest_nor_torch_nor_pandas():
    out = subprocess.run([sys.executable, "-c", LOADED, *CORE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_public_names_exist():
    assert all(hasattr(mluverify, name) for name in mluverify.__all__)
    assert not any(name.startswith("pytest_") for name in mluverify.__all__)


def test_dash_p_mluverify_works_without_the_entry_point(pytester):
    pytester.makepyfile(test_add="""
import torch

def test_add(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
""")
    script = pytester.path / "without_entry_point.py"
    script.write_text(WITHOUT_ENTRY_POINT)
    result = pytester.run(sys.executable, str(script), "-p", "mluverify", "-p", "no:cacheprovider",
                          "--mlu-target=cpu64:eager", f"--mlu-report={pytester.path / 'run'}")
    result.assert_outcomes(passed=1)
    assert "mluverify-" not in result.stdout.str().split("plugins:", 1)[-1].splitlines()[0]  # not autoloaded
    assert (pytester.path / "run" / "records.parquet").exists()
