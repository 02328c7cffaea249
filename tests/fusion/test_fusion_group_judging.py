"""Each fusion group of a fused (``mlu:cnml``) case is judged against its own graph on the CPU,
so a fused kernel error that the rest of the network damps below the bound still fails the
case, named by its group; ``--mlu-dump=fail`` then dumps the groups and dump-diff blames it.

The planted bug (``planted_transposed_matmul``): the fused ``bmm`` 3 % off when an operand is a
transposed view, as attention's ``q @ k^T`` is. In the attention block below the scores get an
additive mask, and ``DEBUG_FORCED_FALLBACK_OPS=aten::add.Tensor`` (as in suites/fusion) keeps the
adds out of the groups: the first group ends at the scaled scores (3 % off), the softmax in the
next group damps the error to about 0.1 % at the output, well under cnml's 2 %.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest

from mluverify.cli import main

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

PLUGIN = Path(__file__).with_name("planted_transposed_matmul.py")

SUITE = """
import math

import torch
import torch.nn as nn


class MaskedAttention(nn.Module):
    '''BERT-style self-attention (heads folded into the batch): scaled scores plus an additive
    mask, softmax, the values, a residual.'''

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, mask):
        batch, length, width = x.shape
        size = width // self.heads
        q, k, v = (t.reshape(batch, length, self.heads, size).transpose(1, 2).reshape(batch * self.heads, length, size)
                   for t in self.qkv(self.norm(x)).split(width, dim=2))
        scores = q @ k.transpose(1, 2) / math.sqrt(size) + mask
        y = (torch.softmax(scores, dim=-1) @ v).reshape(batch, self.heads, length, size)
        return x + self.out(y.transpose(1, 2).reshape(batch, length, width))


def test_masked_attention(verify, monkeypatch):
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor")
    torch.manual_seed(0)
    mask = torch.triu(torch.full((8, 8), -1e4), 1)
    verify(MaskedAttention().eval(), torch.randn(2, 8, 32), mask, op="masked_attention")
"""


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """The block on mlu:cnml with the planted bug, dumped on failure: (pytest output, records, run
    dir). One pytest process for the module's tests (a plain subprocess: pytester is per test)."""
    directory = tmp_path_factory.mktemp("planted")
    shutil.copy(PLUGIN, directory / PLUGIN.name)
    (directory / "test_attention.py").write_text(SUITE)
    run = directory / "run"
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "mluverify", "-p", "planted_transposed_matmul",
                          "test_attention.py", "--mlu-target=mlu:cnml", f"--mlu-report={run}", "--mlu-dump=fail",
                          "-p", "no:cacheprovider", "-q"],
                         cwd=directory, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(directory), os.environ.get("PYTHONPATH"))))})
    return ran.stdout + ran.stderr, pd.read_parquet(run / "records.parquet"), run


def test_a_damped_fused_kernel_error_fails_the_case_by_its_group(planted_run):
    output, records, _ = planted_run
    assert "1 failed" in output, output[-3000:]
    case = records.set_index("kind")
    # the network's output is within cnml's bound: judged alone, the case would pass ...
    assert bool(case.loc["output", "passed"]) and case.loc["output", "value"] < 0.002
    groups = records[records["kind"] == "group"].set_index("leaf")
    # ... its first group (the scaled scores) is 3 % off its own graph on the CPU, the second is not
    assert not groups.loc["MLUFusionGroup0[0]", "passed"] and groups.loc["MLUFusionGroup0[0]", "value"] > 0.02
    assert groups.loc["MLUFusionGroup0[0]", "status"] == "failed"
    assert bool(groups.loc["MLUFusionGroup1[0]", "passed"])
    assert "fusion group MLUFusionGroup0 (" in groups.loc["MLUFusionGroup0[0]", "reason"]
    assert "aten::matmul" in groups.loc["MLUFusionGroup0[0]", "reason"]
    assert "Mismatch at output MLUFusionGroup0[0]: fusion group MLUFusionGroup0" in output
    assert set(records["bound"]) == {0.02}  # each group judged by the case's (cnml) tolerance


def test_dump_diff_of_the_fused_failure_blames_the_group(planted_run, capsys):
    _, records, run = planted_run
    (dump,) = (run / "dumps").iterdir()
    assert main(["dump-diff", str(dump)]) == 1
    out = capsys.readouterr().out
    assert "first offender: fusion group MLUFusionGroup0 output 0 (ops: aten::layer_norm, aten::linear" in out


def test_a_group_whose_cpu_graph_raises_is_left_unjudged_and_the_model_still_runs_fused():
    """A float16 LSTM's captured initial states stay float16 in the group's float32 CPU graph,
    which oneDNN refuses: recording the groups must not demote the fused program."""
    import torch

    from mluverify.device import fuse, fusion_summary
    from mluverify.device.fusion.debug import recording_group_runs

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 8, num_layers=1, batch_first=True).half().eval()
    x = torch.randn(2, 3, 4).half()
    fused = fuse(lstm.to("mlu"), (x.to("mlu"),))
    with recording_group_runs() as runs:
        fused(x.to("mlu"))
    assert fusion_summary(fused).demotions == 0 and fusion_summary(fused).executed_as == "fused"
    (run,) = runs
    assert run.reference == () and run.unjudged.startswith("RuntimeError: ")


ROOT = Path(__file__).resolve().parents[2]
BERT_CASE = "bert_encoder and float32 and not quantized and not bfloat16"


def _bert_case(tmp_path: Path, *plugins: str) -> tuple[str, pd.DataFrame]:
    """The network suite's BERT encoder case on mlu:cnml (MLU270), with the given plugins."""
    report = tmp_path / "run"
    loaded = [arg for plugin in plugins for arg in ("-p", plugin)]
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "mluverify", *loaded, "suites/networks/test_networks.py",
                          "-k", BERT_CASE, "--mlu-target=mlu:cnml", "--mlu-core-version=MLU270", f"--mlu-report={report}",
                          "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-n", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(PLUGIN.parent), os.environ.get("PYTHONPATH"))))})
    return ran.stdout + ran.stderr, pd.read_parquet(report / "records.parquet")


def test_an_error_damped_inside_one_group_fails_the_network_case_by_the_value_inside(tmp_path):
    """The BERT encoder fuses whole into one group, softmax included: the planted 3 % on
    ``q @ k^T`` leaves the output within cnml's bound, but the value inside the group furthest
    from the group's graph on the CPU is that bmm's, and it fails the case."""
    output, records = _bert_case(tmp_path, "planted_transposed_matmul")
    assert "1 failed" in output, output[-3000:]
    case = records.set_index("kind")
    assert bool(case.loc["output", "passed"]) and case.loc["output", "value"] < 0.02
    inner = case.loc["group"]
    assert inner["leaf"].startswith("MLUFusionGroup0.bmm") and not inner["passed"] and inner["value"] > 0.03
    assert "(aten::bmm) inside fusion group MLUFusionGroup0 against its own graph on the CPU" in inner["reason"]
    assert f"Mismatch at output {inner['leaf']}" in output


def test_the_clean_network_case_passes_with_its_inner_values_judged(tmp_path):
    output, records = _bert_case(tmp_path)
    assert "1 passed" in output, output[-3000:]
    inner = records.set_index("kind").loc["group"]
    assert inner["leaf"].startswith("MLUFusionGroup0.") and bool(inner["passed"]) and 0 < inner["value"] < 0.002


def test_the_worst_inner_value_is_the_planted_kernels_and_the_outputs_are_the_engines():
    """An engine whose mm kernel is 3 % off (its ATen op noted, as the fused-numerics passes do):
    the softmax after it damps the error in the output; the inner value kept is the mm's, 3 % off
    its ATen op on the same reference values, and the outputs are the engine's own, bit for bit."""
    import torch
    from torch import fx

    from mluverify.device.fusion import numerics
    from mluverify.device.fusion.inner import run_beside_reference

    def planted_mm(a, b):
        return torch.ops.aten.mm.default(a, b) * 1.03

    engine = fx.symbolic_trace(lambda x, w: torch.ops.aten._softmax.default(torch.ops.aten.mm.default(x, w), -1, False))
    (mm,) = [n for n in engine.graph.nodes if n.target is torch.ops.aten.mm.default]
    mm.meta[numerics.ATEN_OP], mm.target = mm.target, planted_mm
    engine.recompile()
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    beside = run_beside_reference(engine, [x, w])
    assert torch.equal(beside.outputs, engine(x, w)) and not beside.unjudged
    assert beside.worst.node == mm.name and beside.worst.op == "aten::mm"
    assert beside.worst.rel_mse == pytest.approx(0.03, rel=1e-3)
    assert torch.equal(beside.worst.reference, x @ w)
    damped = torch.linalg.vector_norm(beside.outputs - torch.softmax(x @ w, -1)) / torch.linalg.vector_norm(torch.softmax(x @ w, -1))
    assert damped < beside.worst.rel_mse


def test_a_device_kernel_without_its_aten_op_leaves_the_inner_values_unjudged():
    """A kernel the passes did not note the ATen op of must not serve as its own reference."""
    import torch
    from torch import fx

    from mluverify.device.fusion.inner import run_beside_reference

    engine = fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    beside = run_beside_reference(engine, [torch.randn(3)])
    assert beside.worst is None and "no ATen op known for" in beside.unjudged


def test_only_a_call_split_into_groups_hands_its_groups_over(monkeypatch):
    """Fused whole into one group, the group's outputs are the case's, judged already: only the
    value inside it furthest from its graph on the CPU is handed over; split (here by a forced
    fallback), each group is handed over with its ops, and its inner value beside it."""
    import torch

    from mluverify.core.case import Case, Target
    from mluverify.plugins._fused_targets import run_fused

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(4, 8)
    case = Case("case", "mlp", Target("mlu", "cnml"))
    _, summary, groups = run_fused(model, (x,), {}, case)
    assert summary.executed_as == "fused" and len(summary.groups) == 1
    assert [(g.name, g.ops, g.inside[:5]) for g in groups] == [("MLUFusionGroup0", ("aten::addmm",), "addmm")]
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::relu")
    _, summary, groups = run_fused(model, (x,), {}, case)
    assert summary.executed_as == "partially fused"
    assert [(g.name, g.ops) for g in groups if not g.inside] == [("MLUFusionGroup0", ("aten::linear",)),
                                                                 ("MLUFusionGroup1", ("aten::linear",))]
    assert [(g.name, g.ops) for g in groups if g.inside] == [("MLUFusionGroup0", ("aten::addmm",)),
                                                             ("MLUFusionGroup1", ("aten::addmm",))]
    assert all(g.actual[0].shape == g.expected[0].shape and not g.unjudged for g in groups)


CONSTANT_IN_FLOAT16 = """
import torch
import torch.nn as nn


class ReversedWithAZero(nn.Module):
    '''A constant group (the positions' arange, float16 zeros made as the Hugging Face masks make
    theirs), unfused flips and an index after it, then a floating group.'''

    def forward(self, x):
        ids = torch.arange(x.shape[-1], device=x.device)
        zeros = torch.zeros(x.shape[-1], dtype=x.dtype, device=x.device)
        return torch.relu(x[..., ids.flip(0)] + zeros.flip(0))


def test_reversed(verify):
    torch.manual_seed(0)
    verify(ReversedWithAZero().eval(), torch.randn(4, 8), op="reversed", dtype="float16")
"""


def test_a_float16_constant_of_a_group_is_judged_by_value_not_by_its_dtype(pytester):
    # the group's CPU graph runs in float32, yet the zero it makes keeps float16 there: judged as
    # "dtype mismatch: actual float32 vs expected float16" until both sides were upcast
    pytester.makepyfile(test_reversed=CONSTANT_IN_FLOAT16)
    report = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=mlu:cnml", f"--mlu-report={report}",
                                           "-p", "no:cacheprovider", "-p", "no:randomly")
    records = pd.read_parquet(report / "records.parquet")
    groups = records[records["kind"] == "group"]
    assert len(groups) >= 2 and groups["passed"].all(), groups[["leaf", "reason"]].to_string()
    assert set(groups["executed_as"]) == {"partially fused"}
    result.assert_outcomes(passed=1)
