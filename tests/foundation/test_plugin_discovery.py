"""A third-party plugin package is found through the `mluverify` entry-point group."""
import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "mluverify-example-plugin"

CHECK = """
import json, sys, torch
from pathlib import Path
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.core.pipeline import Pipeline
from mluverify.report.records import ShardWriter

pm = new_plugin_manager()
pipeline = Pipeline(pm, Settings(), Path(sys.argv[1]), ShardWriter)
case = Case("example::case", "example_noisy_op", Target("halfcpu", "eager"))
torch.manual_seed(0)
outcome = pipeline.verify(torch.tanh, (torch.randn(1000),), {}, case)
pipeline.close()
print(json.dumps({"plugins": [name for name, _ in pm.list_name_plugin()],
                  "record": outcome.record.as_row()}, default=str))
"""


def test_example_plugin_is_discovered_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(EXAMPLE)],
                   check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "run")], env=env,
                         check=True, capture_output=True, text=True)
    found = json.loads(out.stdout.splitlines()[-1])
    assert "example" in found["plugins"]
    record = found["record"]
    # its back end ran the case in bfloat16 (a real deviation), its tolerance judged it ...
    assert record["backend"] == "halfcpu" and 0 < record["value"] < 0.05
    assert record["bound"] == 0.05 and record["passed"]
    # ... and its metric is recorded
    assert json.loads(record["extra_metrics"])["mean_abs_error"] > 0


def test_without_the_package_the_plugin_is_absent(tmp_path):
    out = subprocess.run([sys.executable, "-c",
                          "from mluverify.core.plugin_manager import new_plugin_manager as n;"
                          "print([k for k, _ in n().list_name_plugin()])"],
                         check=True, capture_output=True, text=True)
    assert "example" not in out.stdout
