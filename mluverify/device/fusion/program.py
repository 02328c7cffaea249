"""A fused program: one model captured, partitioned and built for one input signature."""
from __future__ import annotations

import collections
import logging
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch import fx, nn

from mluverify.device.fusion import _device
from mluverify.device.fusion.capture import capture
from mluverify.device.fusion.debug import DebugWriter
from mluverify.device.fusion.group import FusedGroup, build_group
from mluverify.device.fusion.partition import OutsideOp, partition
from mluverify.device.fusion.settings import FusionSettings

log = logging.getLogger("mluverify.device.fusion")


@dataclass(frozen=True)
class GroupSummary:
    """One fusion group: its name, the ops fused in it and its storage precision."""

    name: str
    ops: tuple[str, ...]
    storage: str


@dataclass(frozen=True)
class Fallback:
    """Ops that did not run in a fusion group: where they ran instead and why.

    ``runs_on``: ``cnnl`` (per-op device kernel), ``cpu`` (no device kernel, or a program run on
    CPU tensors) or ``layer-by-layer`` (a whole model that could not be captured). ``count``:
    graph nodes for ops left out of the groups, calls for CPU fallbacks and layer-by-layer runs.
    """

    op: str
    runs_on: str
    reason: str
    count: int = 1


class FusedProgram:
    """The partitioned graph of one model for one input signature, groups built."""

    def __init__(self, graph_module: fx.GraphModule, groups: list[FusedGroup], outside: list[OutsideOp],
                 on_device: bool) -> None:
        self.graph_module = graph_module
        self.groups = groups
        self.outside = outside
        self.on_device = on_device

    def __call__(self, *inputs: object) -> object:
        return self.graph_module(*inputs)

    def group_summaries(self) -> tuple[GroupSummary, ...]:
        return tuple(GroupSummary(g.name, g.ops, str(g.storage).removeprefix("torch.")) for g in self.groups)

    def fallbacks(self) -> tuple[Fallback, ...]:
        """The ops outside every group, one entry per op and reason, counting graph nodes."""
        runs_on = "cnnl" if self.on_device else "cpu"
        counts = collections.Counter((o.op, o.reason) for o in self.outside)
        return tuple(Fallback(op, runs_on, reason, n) for (op, reason), n in counts.items())

    def describe(self) -> str:
        """The partitioned graph and each group's fused graph, as printed for TORCH_MIN_CNLOG_LEVEL=-1."""
        parts = [f"partitioned graph:\n{self.graph_module.graph}"]
        parts += [f"{g.name} ({len(g.ops)} ops):\n{g.engine.graph}" for g in self.groups]
        return "\n".join(parts)


def build_program(model: nn.Module, inputs: tuple, settings: FusionSettings) -> FusedProgram:
    """Capture ``model`` for ``inputs`` (CPU or device tensors), partition it and build its groups.

    :raises CaptureError: when the model cannot be captured as one graph.
    """
    # Tensors nested in the inputs (an op's argument tuple, its keyword dict) count as inputs too.
    on_device = any(isinstance(x, torch.Tensor) and _device.on_device(x) for x in pytree.tree_leaves(inputs))
    example = pytree.tree_map_only(torch.Tensor, _device.as_cpu, inputs)
    graph_module = capture(model, example, _device.as_cpu)
    names, outside = partition(graph_module, settings)
    groups = [build_group(graph_module, node) for node in list(graph_module.graph.nodes)
              if node.op == "call_module" and node.target in names]
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    if on_device:
        _move_attributes(graph_module)
        _retarget_devices(graph_module)
        for group in groups:
            group.on_device = True
    if settings.debug:
        writer = DebugWriter(settings.debug_dir, settings.debug)
        for group in groups:
            group.debug = writer
    program = FusedProgram(graph_module, groups, outside, on_device)
    if settings.print_graph:  # TORCH_MIN_CNLOG_LEVEL=-1, the seeds' debug mode: a DEBUG line
        log.debug("%s", program.describe())
    return program


def _retarget_devices(graph_module: fx.GraphModule) -> None:
    """Make the ops outside the groups create tensors on the device: capture ran on CPU views,
    so factories (e.g. an LSTM's initial state) and copies recorded ``device=cpu``."""
    device = torch.device(_device.DEVICE_TYPE)
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and isinstance(node.kwargs.get("device"), torch.device) \
                and node.kwargs["device"].type == "cpu":
            node.update_kwarg("device", device)
    graph_module.recompile()


def _move_attributes(graph_module: fx.GraphModule) -> None:
    """Put the weights still read outside the groups (by per-op device kernels) on the device."""
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            owner_path, _, name = node.target.rpartition(".")
            owner = graph_module.get_submodule(owner_path)
            value = getattr(owner, name)
            moved = _device.to_device(value.detach())
            if isinstance(value, nn.Parameter):
                owner._parameters[name] = nn.Parameter(moved, requires_grad=False)
            elif name in owner._buffers:
                owner._buffers[name] = moved
            else:
                setattr(owner, name, moved)
