"""Captured cases replay on every target honestly: device moves, host reads (``.item()``) and
mluverify's own ops are the program's provenance, counted in the cases file and never cases;
a case whose op the fused engine cannot take is skipped on ``mlu:cnml`` with the reason, by the
one rule of the collector (``FusedRule``) that the shipped captured suites use as well."""
import re
import shutil
import textwrap
from pathlib import Path

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest
import torch

from mluverify.cli import main
from mluverify.core.case import Target
from mluverify.dump import read_cases, read_replay_cases
from mluverify.dump._capture import provenance_kind
from mluverify.pytest_plugin.cases import FusedRule

pytest.importorskip("mluverify.device")

SHIPPED = Path(__file__).parents[2] / "suites" / "captured"
CNML = Target("mlu", "cnml")

# A user's script: two device moves, a host read, the harness's own op, fusible ops and a cast
# on the device (a case, outside the fused engine's fusible set).
SCRIPT = """
import torch
import mluverify.device

torch.ops.mluverify_native.cards()
torch.manual_seed(0)
x = torch.randn(4, 8).to("mlu")
y = torch.relu(x) + x
print(y.sum().item())
y.half().cpu()
"""


@pytest.fixture(scope="module")
def user_cases(tmp_path_factory):
    directory = tmp_path_factory.mktemp("user")
    script = directory / "user_model.py"
    script.write_text(textwrap.dedent(SCRIPT))
    assert main(["capture", "--out", str(directory / "cases"), str(script)]) == 0
    return directory / "cases"


def test_moves_host_reads_and_own_ops_are_counted_not_captured(user_cases):
    meta, rows = read_cases(user_cases)
    assert [row["op"] for row in rows] == ["aten::randn", "aten::relu", "aten::add.Tensor", "aten::sum",
                                           "aten::_to_copy"]
    # to("mlu") and .cpu() are the two moves (half() is a cast: a case), .item() the one host
    # read, cards() the own op
    assert meta.left_out == {"mluverify_native::cards": 1, "aten::_to_copy": 2, "aten::_local_scalar_dense": 1}
    assert meta.ops == 5


def test_a_cast_or_copy_on_one_device_is_a_case():
    x = torch.ones(3)
    assert provenance_kind(torch.ops.aten._to_copy.default, (x,), {"dtype": torch.float16}) is None
    assert provenance_kind(torch.ops.aten.copy_.default, (x, torch.zeros(3)), {}) is None
    assert provenance_kind(torch.ops.aten._to_copy.default, (x,), {"device": torch.device("mlu")}) == "device move"
    assert provenance_kind(torch.ops.aten._local_scalar_dense.default, (x[:1],), {}) == "host read"


def test_user_and_shipped_cases_replay_on_both_targets_without_a_failure(pytester, user_cases):
    """The user's cases and the shipped test_model (with the captured suite's conftest.py), on
    mlu:cnnl and mlu:cnml: nothing fails, nothing is recorded not_fused, and every op skipped on
    mlu:cnml is skipped for the reason FusedRule gives it."""
    shutil.copytree(user_cases, pytester.path / "user")
    shutil.copy(SHIPPED / "conftest.py", pytester.path / "conftest.py")  # the shipped suite's selection
    shutil.copytree(SHIPPED / "test_model", pytester.path / "test_model")
    result = pytester.runpytest_subprocess(
        "-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=mlu:cnnl", "--mlu-target=mlu:cnml",
        f"--mlu-report={pytester.path / 'run'}", "-rs", "user", "test_model")
    outcomes = result.parseoutcomes()
    assert result.ret == 0 and "failed" not in outcomes and "errors" not in outcomes, result.stdout.str()
    records = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()
    assert "not_fused" not in set(records["status"])
    assert ("relu", "mlu:cnml", "passed") in set(zip(records["op"], records["target"], records["status"]))
    rule, skipped = FusedRule(), _skipped_on_cnml(result.stdout.lines)
    assert "aten::_to_copy" in skipped
    for op, reason in skipped.items():
        assert reason == rule.skip_reason(op, CNML), op
    _, shipped = read_replay_cases(SHIPPED / "test_model")  # a case not comparable is skipped for that first
    assert {case.op for case in shipped if not case.not_comparable and rule.skip_reason(case.op, CNML)} <= set(skipped)


def _skipped_on_cnml(lines: list[str]) -> dict[str, str]:
    """op -> reason of the ``-rs`` lines that name a fused-set skip."""
    found = {}
    for line in lines:
        match = re.search(r"SKIPPED .*: ((aten::\S+) is outside mlu:cnml's fusible set.*)", line)
        if match:
            found[match.group(2)] = match.group(1)
    return found
