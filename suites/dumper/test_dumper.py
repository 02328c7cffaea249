"""The Dumper (issue 6) as a user audits a network with it, checked through the harness.

A network runs on the device under ``Dumper(level=1, use_cpu=True)``: the dump must not change
its result (``verify`` judges the dumped run against the CPU), and ``dump_diff`` must blame no op
on the clean device, every dumped op's own error (device vs CPU on the same inputs) being within
the mode's tolerance. The per-op error tables go to the run being built (the ``mlu_run_dir`` fixture:
``dumps/<case>/dump_diff.{csv,md,html}``) beside the records.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.mlu_targets("mlu:cnnl")


class SmallNet(nn.Module):
    """conv, an add with a scalar, relu, pooling, linear, log_softmax (the dumper's test net)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x) + 1.0))), 2)
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


class DumpedOnDevice(nn.Module):
    """Runs ``model`` under the Dumper when its input is on the device, plainly on the CPU."""

    def __init__(self, model: nn.Module, dump_dir: Path) -> None:
        super().__init__()
        self.model, self.dump_dir = model, dump_dir

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu":
            return self.model(x)
        from mluverify.dump import Dumper

        with Dumper(str(self.dump_dir), level=1, use_cpu=True):
            return self.model(x)


def _report_dir(run_dir: Path, request: pytest.FixtureRequest) -> Path:
    """``dumps/<test name>`` in the run being built (swapped in with the records at the end)."""
    return run_dir / "dumps" / re.sub(r"[^\w.-]", "_", request.node.name)


@pytest.mark.parametrize("dtype", ("float32", "float16"))
def test_dumped_network_is_unchanged_and_no_op_is_blamed(verify, mlu_run_dir, request, tmp_path, dtype: str) -> None:
    from mluverify.dump import dump_diff, load
    from mluverify.report.dump_diff import write_dump_diff_pages

    torch.manual_seed(0)
    dump_dir = tmp_path / "dump"
    verify(DumpedOnDevice(SmallNet().eval(), dump_dir), torch.rand(2, 1, 16, 16), op="small_net_dumped",
           dtype=dtype, seed=0)
    diff = dump_diff(dump_dir, mode=request.node.callspec.params["mlu_target"].mode)
    write_dump_diff_pages(diff, _report_dir(mlu_run_dir, request))
    dumped_ops = set(load(dump_dir)["op"])
    assert {"aten::convolution", "aten::relu", "aten::addmm", "aten::_log_softmax"} <= dumped_ops, sorted(dumped_ops)
    assert diff.first_offender is None, f"the clean device broke {diff.metric} <= {diff.bound}: {diff.reproducer}"
