"""A compiled target's failing case under ``--mlu-dump=fail`` (found running the model zoo on
the real compilers, issue 39): its program runs outside torch's dispatch, so the Dumper sees only
the export's tracing of it. Re-running it under the Dumper broke ``torch.export`` (the Dumper's
statistics op is no ATen op), which lost the case's verdict: every accuracy failure on
openvino / iree / tvm / executorch became an error (the zoo's ``fail_to_run``) under
``make verify-zoo``; on ort:cpu and cpu:inductor it dumped the exporter's ``detach`` / ``clone``
ops, which dump-diff judged as the case's ("no op blamed"). ``Backend.opaque_modes`` now keeps
such a case's verdict and leaves it undumped.
"""
from __future__ import annotations

import pytest
import torch

from mluverify import hookimpl
from mluverify.core.backends import Backend, Execution
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.dump import dump_case
from mluverify.errors import BackendError
from mluverify.plugins._exported import export_program, exportable
from mluverify.report.records import ShardWriter


class Exported(Backend):
    """A compiler's shape without a compiler: the case captured by ``torch.export`` and its
    program run, 1.5x off (a planted deviation)."""

    name = "exported"
    modes = {"opaque": "cnml", "declared_dumpable": "cnml"}
    opaque_modes = ("opaque",)

    def execute(self, fn, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        program = export_program(exportable(fn, kwargs, case), args, case)
        return Execution(program.module()(*args) * 1.5, executed_as="fused")


class _Plugin:
    @hookimpl
    def mluverify_add_backends(self, registry) -> None:
        registry.add(Exported())


@pytest.fixture
def dumping_pipeline(tmp_path) -> Pipeline:
    """A pipeline that dumps every failing case, as ``--mlu-dump=fail`` does."""
    pm = new_plugin_manager(entry_points=False)
    pm.register(_Plugin())
    return Pipeline(pm, Settings(), tmp_path / "run", ShardWriter, dump_case=dump_case)


def _case(mode: str) -> tuple:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    return model, (torch.randn(3, 8),), Case(f"t[exported:{mode}]", "mlp", Target("exported", mode))


def test_a_failing_case_of_an_opaque_mode_keeps_its_verdict_and_is_not_dumped(dumping_pipeline):
    model, args, case = _case("opaque")
    outcome = dumping_pipeline.verify(model, args, {}, case)
    assert outcome.status == "failed" and outcome.verdict.value > 0.02  # the planted 1.5x, judged
    assert "dump:" not in outcome.record.reproducer
    assert not (dumping_pipeline.run_dir / "dumps").exists()


def test_the_same_program_re_run_under_the_dumper_loses_its_verdict(dumping_pipeline):
    """Why the attribute: a mode not declared opaque is re-run under the Dumper, where
    ``torch.export`` fails on the Dumper's own op and the failure becomes an error."""
    model, args, case = _case("declared_dumpable")
    with pytest.raises(BackendError, match="torch.export failed: .*mluverify_dump"):
        dumping_pipeline.verify(model, args, {}, case)


@pytest.mark.parametrize(("target", "opaque"), [
    ("ort:cpu", True), ("ort:dynamo", True), ("ort:int8", False),  # int8: its layers' outputs are dumped
    ("openvino:cpu", True), ("openvino:default", True), ("openvino:int8", False),
    ("iree:cpu", True), ("tvm:cpu", True), ("executorch:xnnpack", True), ("executorch:int8", True),
    ("cpu:inductor", True), ("mlu:cnnl", False), ("mlu:cnml", False), ("cpu64:eager", False)])
def test_the_compiled_targets_are_opaque_and_the_dumpable_ones_are_not(target, opaque):
    pipeline = Pipeline(new_plugin_manager(entry_points=False), Settings(), None, ShardWriter)
    resolved, backend = pipeline.resolve(target)
    assert (resolved.mode in backend.opaque_modes) is opaque
