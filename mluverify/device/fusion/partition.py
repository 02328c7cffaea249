"""Split a captured graph into ``MLUFusionGroup{i}`` submodules around the ops that cannot fuse.

Uses ``torch.fx.passes.infra.partitioner.CapabilityBasedPartitioner``; every op outside a group
becomes an ``OutsideOp`` with the reason it stayed out.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from mluverify.device.fusion.settings import FusionSettings, op_name

GROUP_PREFIX = "MLUFusionGroup"
_TEMP_PREFIX = "_mlu_partition_"
# Seed 000: "目前MigicMind推理后端支持以下数据类型：非权重算子：float16、float32。权重算子（Conv2d/Linear）：
# int8、int16、float16、float32。" An op computing in anything else from the inputs (an attention
# mask's int64 / bool arithmetic, an integer op case) stays out of the groups and falls back as
# the seed says (CNNL, else the CPU). One that reads no input (``arange`` of a static length: the
# position ids) is a constant the engine folds when it compiles, computed by no kernel. The
# weight ops' int8 / int16 are the quantized layers' own weights; their results are floating.
ENGINE_DTYPES = (torch.float16, torch.float32)


@dataclass(frozen=True)
class OutsideOp:
    """An op of the captured graph that runs outside every fusion group, and why."""

    node: str
    op: str
    reason: str


class _FusibleOps(OperatorSupportBase):
    """Supports an op when its name is fusible and, when it reads the graph's inputs
    (``from_inputs``: node names), it computes in a dtype the engine takes; a tuple ``getitem``
    follows its producer."""

    def __init__(self, fusible: frozenset[str], from_inputs: frozenset[str]) -> None:
        self.fusible, self.from_inputs = fusible, from_inputs

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            source = node.args[0]
            return isinstance(source, fx.Node) and self.is_node_supported(submodules, source)
        return op_name(node.target) in self.fusible and not (node.name in self.from_inputs and non_engine_dtype(node))


def non_engine_dtype(node: fx.Node) -> str:
    """The dtype ``node`` computes in when the engine does not take it (``"int64"``, ``"bool"``),
    else ``""``. A node computes in floating point when its first tensor result or a tensor it
    reads is floating: a comparison of floats, max pooling (its indices ride along), an
    embedding (floating rows gathered by int64 indices). ``""`` when capture recorded no value."""
    result = _first_tensor(node.meta.get("val"))
    if result is None or result.dtype in ENGINE_DTYPES:
        return ""
    if any(getattr(_first_tensor(arg.meta.get("val")), "dtype", None) in ENGINE_DTYPES for arg in node.all_input_nodes):
        return ""
    return str(result.dtype).removeprefix("torch.")


def _first_tensor(value: object) -> torch.Tensor | None:
    """``value`` when it is a tensor, else the first tensor of a tuple / list value."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return next((v for v in values if isinstance(v, torch.Tensor)), None)


def partition(graph_module: fx.GraphModule, settings: FusionSettings) -> tuple[list[str], list[OutsideOp]]:
    """Fuse ``graph_module`` in place; return the group names (graph order) and the ops left out."""
    support = _FusibleOps(settings.fusible, _reading_inputs(graph_module.graph))
    outside = [
        OutsideOp(node.name, op_name(node.target), _reason(node, settings))
        for node in graph_module.graph.nodes
        if node.op == "call_function" and node.target is not operator.getitem
        and not support.is_node_supported(None, node)
    ]
    partitioner = CapabilityBasedPartitioner(graph_module, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    if partitions:
        partitioner.fuse_partitions(partitions, prefix=_TEMP_PREFIX)
    return _rename_groups(graph_module), outside


def _reading_inputs(graph: fx.Graph) -> frozenset[str]:
    """The names of the nodes whose value depends on a graph input (placeholder)."""
    reading: set[str] = set()
    for node in graph.nodes:  # topological order: inputs before their users
        if node.op == "placeholder" or any(arg.name in reading for arg in node.all_input_nodes):
            reading.add(node.name)
    return frozenset(reading)


def _reason(node: fx.Node, settings: FusionSettings) -> str:
    name = op_name(node.target)
    if name in settings.forced_fallback:
        return "forced by DEBUG_FORCED_FALLBACK_OPS"
    if name in settings.fusible:
        return f"computes {non_engine_dtype(node)}: the fused engine's non-weight ops take float16 / float32 only"
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
