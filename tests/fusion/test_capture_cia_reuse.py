"""Capture preserves only the CompositeImplicitAutograd ops a program reaches, from a set reused
between captures (``capture._preservable_ops_limited``): the program must be the one
``run_decompositions({})`` gives with torch's whole set, for graphs of every kind (preserved,
decomposed, in-place and higher-order ops, recurrent layers fused or not), also after an op
registered between two captures. The fused runtime's capture (``capture``) skips the retrace where
it would give the same graph back: its graph must be the one torch's program gives too."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import exported_program

from mluverify.device.fusion.capture import capture, capture_program
from mluverify.device.fusion.exported import graph_module_of


def _uncached_graph(model: nn.Module, inputs: tuple, decompositions: dict | None = None) -> str:
    return str(torch.export.export(model, inputs, strict=False).run_decompositions(decompositions or {}).graph)


class _Block(nn.Module):
    """CIA ops preserved (linear), decomposed (reshape: it aliases) and an in-place one."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.linear(x.reshape(3, 4)), inplace=True) + F.gelu(x).sum()


class _Functional(nn.Module):
    """Only preservable CIA ops and plain ATen ones: the limited set applies."""

    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attention = F.scaled_dot_product_attention(x, x, x, is_causal=True)
        return torch.einsum("bij,jk->bik", self.norm(self.linear(attention)), torch.ones(8, 2)).softmax(-1)


class _Branching(nn.Module):
    """A higher-order op (``torch.cond``) with CIA ops in its branches."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: self.linear(t), lambda t: F.gelu(t), (x,))


def _models() -> list:
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.5), nn.Linear(4, 2)).eval()
    encoder = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    return [(_Block().eval(), (torch.randn(12),)), (_Functional().eval(), (torch.randn(2, 4, 8),)),
            (_Branching().eval(), (torch.randn(2, 8),)), (conv, (torch.randn(1, 3, 8, 8),)),
            (encoder, (torch.randn(2, 5, 8),)), (nn.LSTM(4, 6, batch_first=True).eval(), (torch.randn(2, 3, 4),)),
            (nn.Embedding(10, 4).eval(), (torch.tensor([[1, 2, 3]]),))]


@pytest.mark.parametrize(("model", "inputs"), _models(), ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "")
def test_captured_program_is_run_decompositions_program(model: nn.Module, inputs: tuple) -> None:
    for _ in range(2):  # the second capture reuses the set
        assert str(capture_program(model, inputs, lambda t: t).graph) == _uncached_graph(model, inputs)


def test_recurrent_decompositions_keep_the_whole_set() -> None:
    """With LSTM fusion off capture decomposes the LSTM itself; its cell ops are preserved as the
    whole set preserves them (``linear`` stays one op)."""
    from torch._decomp import get_decompositions

    from mluverify.device.fusion.settings import flags

    model, inputs = nn.LSTM(4, 6).eval(), (torch.randn(3, 1, 4),)
    table = get_decompositions([torch.ops.aten.lstm.input])
    with flags(enabled=False):
        graph = str(capture_program(model, inputs, lambda t: t).graph)
    assert "aten.linear" in graph
    assert graph == _uncached_graph(model, inputs, table)


def test_a_plain_graph_overrides_only_its_own_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The saving itself: run_decompositions overrides the kernels of the graph's CIA ops, not of
    the ~500 preservable ones."""
    overridden = []
    override = exported_program._override_composite_implicit_decomp

    def counting(cia_ops_to_callable: dict):
        overridden.append(set(cia_ops_to_callable))
        return override(cia_ops_to_callable)

    monkeypatch.setattr(exported_program, "_override_composite_implicit_decomp", counting)
    capture_program(_Functional().eval(), (torch.randn(2, 4, 8),), lambda t: t)
    names = {op.name() for op in set().union(*overridden)}
    assert names and names <= {"aten::linear", "aten::layer_norm", "aten::scaled_dot_product_attention",
                               "aten::einsum", "aten::softmax.int"}


def test_an_op_registered_between_captures_is_preserved() -> None:
    model, inputs = _Block().eval(), (torch.randn(12),)
    capture_program(model, inputs, lambda t: t)  # the set, before the op exists
    library = torch.library.Library("mluverify_cia_reuse", "DEF")  # kept alive: the op lives as long as it
    library.define("double(Tensor x) -> Tensor")
    library.impl("double", lambda x: x * 2, "CompositeImplicitAutograd")

    class Doubling(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.mluverify_cia_reuse.double(x) + 1

    graph = str(capture_program(Doubling(), inputs, lambda t: t).graph)
    assert "mluverify_cia_reuse.double.default" in graph  # preserved, as a fresh set preserves it
    assert graph == _uncached_graph(Doubling(), inputs)


class _Masked(nn.Module):
    """A data-dependent size (boolean-mask indexing): runtime assertions on a symbolic size."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x[mask])


def _counting_retraces(monkeypatch: pytest.MonkeyPatch) -> list:
    retraces = []
    retrace = torch.export.ExportedProgram.run_decompositions

    def counting(self, *args, **kwargs):
        retraces.append(self)
        return retrace(self, *args, **kwargs)

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", counting)
    return retraces


class _SortIndices(nn.Module):
    """An op one of whose outputs is unused (the sorted values): the retrace drops its ``getitem``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=0, stable=True).indices.clamp(-1, 0)


_FUSED_MODELS = [*_models(), (_Masked(), (torch.randn(5), torch.tensor([True, False, True, True, False]))),
                 (_SortIndices(), (torch.randn(6, 3),))]


@pytest.mark.parametrize(("model", "inputs"), _FUSED_MODELS,
                         ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "")
def test_the_fused_runtime_s_graph_is_run_decompositions_graph(model: nn.Module, inputs: tuple) -> None:
    expected = graph_module_of(torch.export.export(model, inputs, strict=False).run_decompositions({})).code
    assert capture(model, inputs, lambda t: t).code == expected


@pytest.mark.parametrize(("model", "inputs", "retraced"), [
    (_Functional().eval(), (torch.randn(2, 4, 8),), False),  # functional ATen and preserved CIA ops only
    (nn.Embedding(10, 4).eval(), (torch.tensor([[1, 2, 3]]),), False),
    (_Block().eval(), (torch.randn(12),), True),  # relu_ in place, reshape decomposed
    (_Branching().eval(), (torch.randn(2, 8),), True),  # torch.cond
    (_Masked(), (torch.randn(5), torch.tensor([True, False, True, True, False])), True),  # symbolic size
], ids=["functional", "embedding", "in-place", "higher-order", "data-dependent"])
def test_the_fused_runtime_skips_only_retraces_that_change_nothing(
        monkeypatch: pytest.MonkeyPatch, model: nn.Module, inputs: tuple, retraced: bool) -> None:
    retraces = _counting_retraces(monkeypatch)
    capture(model, inputs, lambda t: t)
    assert bool(retraces) is retraced
    retraces.clear()
    program = capture_program(model, inputs, lambda t: t)  # the offline program: always the ATen dialect
    assert retraces and program.dialect == "ATEN"
