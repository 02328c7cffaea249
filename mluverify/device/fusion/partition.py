"""Split a captured graph into ``MLUFusionGroup{i}`` submodules around the ops that cannot fuse.

Uses ``torch.fx.passes.infra.partitioner.CapabilityBasedPartitioner``; every op outside a group
becomes an ``OutsideOp`` with the reason it stayed out.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from mluverify.device.fusion.settings import FusionSettings, op_name

GROUP_PREFIX = "MLUFusionGroup"
_TEMP_PREFIX = "_mlu_partition_"


@dataclass(frozen=True)
class OutsideOp:
    """An op of the captured graph that runs outside every fusion group, and why."""

    node: str
    op: str
    reason: str


class _FusibleOps(OperatorSupportBase):
    """Supports an op when its name is fusible; a tuple ``getitem`` follows its producer."""

    def __init__(self, fusible: frozenset[str]) -> None:
        self.fusible = fusible

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            source = node.args[0]
            return isinstance(source, fx.Node) and self.is_node_supported(submodules, source)
        return op_name(node.target) in self.fusible


def partition(graph_module: fx.GraphModule, settings: FusionSettings) -> tuple[list[str], list[OutsideOp]]:
    """Fuse ``graph_module`` in place; return the group names (graph order) and the ops left out."""
    support = _FusibleOps(settings.fusible)
    outside = [
        OutsideOp(node.name, op_name(node.target), _reason(op_name(node.target), settings))
        for node in graph_module.graph.nodes
        if node.op == "call_function" and node.target is not operator.getitem
        and not support.is_node_supported(None, node)
    ]
    partitioner = CapabilityBasedPartitioner(graph_module, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    if partitions:
        partitioner.fuse_partitions(partitions, prefix=_TEMP_PREFIX)
    return _rename_groups(graph_module), outside


def _reason(name: str, settings: FusionSettings) -> str:
    if name in settings.forced_fallback:
        return "forced by DEBUG_FORCED_FALLBACK_OPS"
    return "not in the fusible set (mluverify_fusible_ops)"


def _rename_groups(graph_module: fx.GraphModule) -> list[str]:
    """Rename the partitioner's submodules to ``MLUFusionGroup{i}``, numbered in graph order."""
    names = []
    for node in graph_module.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith(_TEMP_PREFIX):
            name = f"{GROUP_PREFIX}{len(names)}"
            graph_module.add_submodule(name, graph_module.get_submodule(node.target))
            graph_module.delete_submodule(node.target)
            node.target = name
            node.name = name
            names.append(name)
    graph_module.recompile()
    return names
