"""The standalone script of a finding on a real compiler needs only torch and that compiler's
package: it runs the program the back end's way in a fresh process, without mluverify."""
import os
import subprocess
import sys

import pytest
from test_fuzz_corpus import _finding

from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.corpus import keep

REAL_COMPILERS = ("ort:cpu", "ort:dynamo", "openvino:cpu", "openvino:default", "executorch:xnnpack", "tvm:cpu", "iree:cpu")


@pytest.mark.heavy  # one export and compile per compiler, each in a fresh process
@pytest.mark.parametrize("target", REAL_COMPILERS)
def test_the_script_runs_the_program_on_the_compiler_alone(target, tmp_path):
    missing = TargetRunner().unavailable_reason(target)
    if missing:
        if os.environ.get("CI") == "true" and "not installed" not in missing:
            pytest.fail(f"{target} installed but unusable: {missing}")
        pytest.skip(f"{target} unavailable: {missing}")
    finding, _ = keep(tmp_path, _finding(target))
    script = (tmp_path / f"{finding.signature}.py").read_text()
    assert "mluverify" not in script.split('"""', 2)[2]  # the docstring names it; the code does not
    ran = subprocess.run([sys.executable, f"{finding.signature}.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    # relu -> softmax is right on every compiler: exit 0 and the errors line of its output.
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"output 0 (2, 3) torch.float32 ({target}: (2, 3) torch.float32)" in ran.stdout
