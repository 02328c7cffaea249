"""Capture reuses torch's set of preservable CompositeImplicitAutograd ops between captures
(``capture._preservable_ops_reused``): the program must be the one ``run_decompositions({})``
gives without the reuse, also after an op registered between two captures."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mluverify.device.fusion.capture import capture_program


def _uncached_graph(model: nn.Module, inputs: tuple) -> str:
    return str(torch.export.export(model, inputs, strict=False).run_decompositions({}).graph)


class _Block(nn.Module):
    """CIA ops preserved (linear), decomposed (reshape: it aliases) and an in-place one."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.linear(x.reshape(3, 4)), inplace=True) + F.gelu(x).sum()


def test_captured_program_is_run_decompositions_program() -> None:
    model, inputs = _Block().eval(), (torch.randn(12),)
    for _ in range(2):  # the second capture reuses the set
        assert str(capture_program(model, inputs, lambda t: t).graph) == _uncached_graph(model, inputs)


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
