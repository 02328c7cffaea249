"""The ``mlu`` back end runs on a real ``torch_mlu`` when one can be imported.

A minimal package (``minimal_torch_mlu/torch_mlu``: registers device ``mlu``, host memory,
kernels for copies and ``add``) is copied into a temporary directory and put on the path of a
subprocess, as an installed torch_mlu would be; the emulator must then stay unloaded.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MINIMAL_PACKAGE = Path(__file__).parent / "minimal_torch_mlu" / "torch_mlu"

# argv[1]: the module whose core version the cases must leave as they found it.
RUN_CASES = """
import importlib, json, sys, torch
from mluverify.core.case import Case, Target
from mluverify.plugins.mlu_backend import MluBackend

backend = MluBackend()
a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 0.25, -4.0])
found = {"impl": backend.impl, "variants": list(backend.variants), "unavailable": backend.unavailable_reason()}
for mode, core_version in (("cnnl", ""), ("cnml", "MLU370")):
    case = Case(case_id=f"add-{mode}", op="add", target=Target("mlu", mode), core_version=core_version)
    execution = backend.execute(torch.add, (a, b), {}, case=case)
    found[mode] = {"output": execution.output.tolist(), "device": execution.output.device.type,
                   "executed_as": execution.executed_as, "info": execution.info}
found["core_version_after"] = importlib.import_module(sys.argv[1]).get_core_version()
found["torch_mlu"] = getattr(sys.modules.get("torch_mlu"), "__file__", None)
found["emulator_loaded"] = sorted(m for m in sys.modules if m.startswith("mluverify.device"))
print(json.dumps(found))
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory holding the minimal torch_mlu, as site-packages would."""
    shutil.copytree(MINIMAL_PACKAGE, tmp_path / "torch_mlu")
    return tmp_path


def _run_cases(site: Path, mlu_model: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", RUN_CASES, mlu_model], capture_output=True, text=True,
                          timeout=300, env=env, cwd=site)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_mlu_backend_selects_an_importable_torch_mlu_and_never_loads_the_emulator(site):
    found = _run_cases(site, "torch_mlu.core.mlu_model")
    assert found["torch_mlu"] == str(site / "torch_mlu" / "__init__.py")
    assert (found["impl"], found["variants"], found["unavailable"]) == ("torch_mlu", [], None)
    assert found["emulator_loaded"] == []
    for mode in ("cnnl", "cnml"):
        assert found[mode]["output"] == [1.5, 2.25, -1.0] and found[mode]["device"] == "cpu"
    assert found["cnnl"]["executed_as"] == "device"
    assert found["cnml"]["executed_as"] == "fused"  # the seeds' jit.trace flow; torch_mlu reports no groups
    # What the card reports, not what the emulator would: its core version, 4 cores.
    assert found["cnnl"]["info"] == {"device_impl": "torch_mlu", "core_version": "MLU290", "core_number": 4}
    assert found["cnml"]["info"] == {"device_impl": "torch_mlu", "core_version": "MLU370", "core_number": 4}
    assert found["core_version_after"] == "MLU290"  # the case's core version was undone


def test_without_torch_mlu_the_emulator_runs(tmp_path):
    found = _run_cases(tmp_path, "mluverify.device.mlu_model")
    assert (found["impl"], found["variants"], found["torch_mlu"]) == ("emulator", ["MLU270", "MLU370"], None)
    assert found["cnnl"]["info"] == {"device_impl": "emulator", "core_version": "MLU270", "core_number": 4}
    assert found["cnml"]["info"]["core_version"] == "MLU370" and found["core_version_after"] == "MLU270"


SUITE = """
import torch


def test_add(verify):
    verify(torch.add, torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]), op="add")
"""


def test_a_suite_run_records_that_torch_mlu_ran(site, tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "mluverify", "-p", "no:cacheprovider", "-q", "test_suite.py",
         "--mlu-target", "mlu:cnnl", "--mlu-target", "mlu:cnml", "--mlu-report", str(report)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import pandas as pd

    records = pd.read_parquet(report / "records.parquet").sort_values("target")
    assert list(records["target"]) == ["mlu:cnml", "mlu:cnnl"]
    assert set(records["device_impl"]) == {"torch_mlu"}
    assert list(records["executed_as"]) == ["fused", "device"]
    assert set(records["status"]) == {"passed"}
