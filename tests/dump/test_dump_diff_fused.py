"""dump-diff of a fused (``mlu:cnml``) case: the run dumped layer by layer never reaches a fused
kernel, so the dump also keeps each fusion group's outputs beside its own graph on the CPU, and
dump-diff blames the first group whose own error breaks the bound, naming its ops."""
import pytest
import torch

from mluverify import hookimpl
from mluverify.cli import main
from mluverify.core.backends import BackendRegistry
from mluverify.core.case import Case
from mluverify.core.plugin_manager import call_hook, configured_plugin_manager, new_plugin_manager
from mluverify.dump import dump_case, dump_diff
from mluverify.dump._groups import DEBUG_INDEX

pytest.importorskip("mluverify.device")


class WrongFusedSigmoid:
    """The fused mode's (cnml) sigmoid 10 % too large; the layer-by-layer (cnnl) one is right."""

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::sigmoid", lambda self: torch.sigmoid(self) * 1.1, mode="cnml")


def _dump_fused_case(directory, *plugins):
    """A linear -> sigmoid -> linear model run on mlu:cnml, dumped as ``--mlu-dump=fail`` does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Sigmoid(), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(4, 8)
    with configured_plugin_manager(list(plugins), entry_points=False):
        registry = BackendRegistry()
        call_hook(new_plugin_manager(), "mluverify_add_backends", registry=registry)
        target, backend = registry.resolve("mlu:cnml")
        case = Case(case_id="fused_case", op="mlp", target=target, suite="dump")
        return dump_case(lambda: backend.execute(model, (x,), {}, case=case), (), {}, directory / "dump")


def test_a_fused_only_bug_is_blamed_on_its_group_by_name_and_ops(tmp_path, capsys):
    dumped = _dump_fused_case(tmp_path, WrongFusedSigmoid())
    diff = dump_diff(dumped)
    # the layer-by-layer ops are right (the bug is in the fused kernel only) ...
    assert diff.first_offender is None
    # ... the group is not: its sigmoid output is 10 % off its own graph on the CPU
    group = diff.first_group
    assert group is not None and group["group"] == "MLUFusionGroup0"
    assert "aten::sigmoid" in group["ops"].split() and group["own_value"] > 0.02
    assert diff.verdict == "blamed" and diff.group_source == "policy:cnml"
    assert "mmouttensor_MLUFusionGroup0_0" in diff.reproducer
    assert main(["dump-diff", str(dumped)]) == 1
    out = capsys.readouterr().out
    assert "first offender: fusion group MLUFusionGroup0 output 0 (ops: aten::linear, aten::sigmoid" in out
    assert "against the group's own graph on the CPU" in out
    assert (dumped / "dump_diff_groups.csv").is_file()
    assert "## Fusion groups" in (dumped / "dump_diff.md").read_text()


def test_a_correct_fused_run_blames_no_group(tmp_path):
    diff = dump_diff(_dump_fused_case(tmp_path))
    assert len(diff.groups) == 1 and bool(diff.groups["own_passed"].all())
    assert diff.first_group is None and diff.verdict == "clean"


def test_the_dump_reads_the_index_the_device_writes():
    from mluverify.device.fusion.debug import INDEX_NAME

    assert DEBUG_INDEX == INDEX_NAME
