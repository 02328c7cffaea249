"""One fusion group, built into a fused engine: ``MLUFusionGroup{i}`` of a partitioned graph."""
from __future__ import annotations

import operator
from dataclasses import replace

import torch
import torch.utils._pytree as pytree
from torch import fx, nn

from mluverify.device.fusion import _device, numerics
from mluverify.device.fusion.debug import DebugWriter, GroupRecording, GroupRun, group_runs
from mluverify.device.fusion.inner import BesideReference, run_beside_reference
from mluverify.device.fusion.settings import op_name
from mluverify.device.kernels import kernel_mode


class FusedGroup(nn.Module):
    """A fusion group run as one unit: device inputs viewed as CPU once, the fused engine run,
    outputs adopted by the device once.

    ``engine`` is the group's graph after the fused-numerics passes, calling the device's
    ``cnml`` kernels; ``reference`` is the group's graph as captured, kept for
    ``FUSED_KERNEL_DEBUG``.
    """

    def __init__(self, name: str, engine: fx.GraphModule, reference: fx.GraphModule,
                 constants: dict[int, torch.Tensor], storage: torch.dtype) -> None:
        super().__init__()
        self.name = name
        self.engine = engine
        self.ops = group_ops(reference)
        self.storage = storage
        # Plain attributes, not submodules or buffers: moving the parent program to the device
        # must not move the reference graph's constants.
        self.__dict__["_reference"] = reference
        self.__dict__["_reference_constants"] = constants
        self.__dict__["_engine_constants"] = [
            getattr(engine, n.target) for n in engine.graph.nodes if n.op == "get_attr"
        ]
        self.debug: DebugWriter | None = None
        # Set by the program that runs on the device: a group reading none of its inputs (the
        # position ids' arange) must still hand device tensors to the ops after it.
        self.on_device = False

    def forward(self, *inputs: object) -> object:
        cpu_inputs = [_device.as_cpu(x) if _device.on_device(x) else x for x in inputs]
        recording = group_runs()
        with kernel_mode("cnml"):  # the kernels' fused numerics: reductions on core_number cores
            if recording is None:
                outputs, beside = self.engine(*cpu_inputs), None
            else:  # the same engine run, node by node beside the group's graph on the CPU
                beside = run_beside_reference(self.engine, cpu_inputs)
                outputs = beside.outputs
        if self.debug is not None:
            self._observe(inputs, outputs, None, None)
        if recording is not None:
            self._observe(inputs, outputs, recording, beside)
        if not (self.on_device or any(_device.on_device(x) for x in inputs)):
            return outputs
        # An output must not take over the memory of an input or a constant.
        borrowed = {t.untyped_storage().data_ptr() for t in cpu_inputs + self._engine_constants
                    if isinstance(t, torch.Tensor)}
        return pytree.tree_map_only(torch.Tensor, lambda t: _adopt(t, borrowed), outputs)

    def reference_outputs(self, inputs: tuple, mode: str) -> object:
        """The group's unfused graph on the same inputs: ``cpu`` in float32, or ``cnnl``
        op by op on the device."""
        convert = _to_float32 if mode == "cpu" else _device.to_device
        args = [convert(_device.as_cpu(x) if mode == "cpu" else x) for x in inputs]
        for index in sorted(self._reference_constants):
            args.insert(index, convert(self._reference_constants[index]))
        return self._reference(*args)

    def _observe(self, inputs: tuple, outputs: object, recording: GroupRecording | None,
                 beside: BesideReference | None) -> None:
        """Hand this call's outputs and its reference run to ``FUSED_KERNEL_DEBUG`` (no
        ``recording``) or to the block recording group runs (with the inner values ``beside``
        the engine found)."""
        fused = _cpu_leaves(outputs)
        if recording is None:
            self.debug.save(self.name, fused, _cpu_leaves(self.reference_outputs(inputs, self.debug.reference)), self.ops)
        elif not recording.outputs:
            recording.runs.append(GroupRun(self.name, self.ops, (), (), "", beside.worst, beside.unjudged))
        else:
            recording.runs.append(replace(self._group_run(inputs, fused), inner=beside.worst,
                                          inner_unjudged=beside.unjudged))

    def _group_run(self, inputs: tuple, fused: list[torch.Tensor]) -> GroupRun:
        """This call as a ``GroupRun`` (copies: the outputs' memory becomes the device tensors').
        Recording must not change how the model runs: a reference graph that raises on the CPU
        (a float16 LSTM's captured float16 initial states beside float32 weights) leaves the
        group unjudged, with the reason."""
        try:
            expected = _copies(_cpu_leaves(self.reference_outputs(inputs, "cpu")))
        except Exception as exc:  # noqa: BLE001 - any failure of the reference, reported, not raised
            first_line = (str(exc).strip().splitlines() or [""])[0]
            return GroupRun(self.name, self.ops, _copies(fused), (), f"{type(exc).__name__}: {first_line}")
        return GroupRun(self.name, self.ops, _copies(fused), expected)


def _adopt(output: torch.Tensor, borrowed: set[int]) -> torch.Tensor:
    """The device tensor for a group output: its memory adopted, or a copy when the output
    is (a view of) an input or a constant, as a fused kernel writes its outputs anew."""
    if output.untyped_storage().data_ptr() in borrowed:
        output = output.clone()
    return _device.as_device(output)


def _to_float32(value: object) -> object:
    return numerics.cast_floating(value, torch.float32)


def _copies(tensors: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return tuple(t.detach().clone() for t in tensors)


def _cpu_leaves(value: object) -> list[torch.Tensor]:
    return [t.cpu() for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def build_group(parent: fx.GraphModule, node: fx.Node) -> FusedGroup:
    """Replace the group called by ``node`` with its fused engine; weights it reads become
    constants of the engine and leave the call's arguments."""
    captured: fx.GraphModule = parent.get_submodule(node.target)
    constants = {
        i: _attribute(parent, arg.target) for i, arg in enumerate(node.args)
        if isinstance(arg, fx.Node) and arg.op == "get_attr"
    }
    storage = _storage_dtype(node, constants)
    engine = _fused_engine(captured, constants, storage)
    node.args = tuple(arg for i, arg in enumerate(node.args) if i not in constants)
    group = FusedGroup(str(node.target), engine, captured, constants, storage)
    parent.delete_submodule(node.target)
    parent.add_submodule(node.target, group)
    return group


def _fused_engine(captured: fx.GraphModule, constants: dict[int, torch.Tensor], storage: torch.dtype) -> fx.GraphModule:
    graph = fx.Graph()
    graph.output(graph.graph_copy(captured.graph, {}))
    engine = fx.GraphModule(nn.Module(), graph, class_name=type(captured).__name__)
    numerics.bind_constants(engine, constants)
    numerics.fold_conv_bn(engine)
    if torch.finfo(storage).bits < 32:
        numerics.round_constants(engine, storage)
        numerics.keep_storage_precision(engine, storage)
    engine = numerics.lower_to_device_ops(engine)
    numerics.compute_in_place(engine, _device.fused_kernel)
    numerics.use_device_kernels(engine, _device.fused_kernel)
    return engine


def _attribute(module: nn.Module, dotted: str) -> torch.Tensor:
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _storage_dtype(node: fx.Node, constants: dict[int, torch.Tensor]) -> torch.dtype:
    """The narrowest floating dtype among the group's inputs and weights (float32 if none)."""
    values = list(constants.values()) + [
        arg.meta.get("val") for arg in node.args if isinstance(arg, fx.Node)
    ]
    floating = {v.dtype for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()}
    return min(floating, key=lambda d: torch.finfo(d).bits, default=torch.float32)


def group_ops(group: fx.GraphModule) -> tuple[str, ...]:
    """The op names of a group's graph, in order (tuple ``getitem``s left out)."""
    return tuple(
        op_name(n.target) for n in group.graph.nodes
        if n.op == "call_function" and n.target is not operator.getitem
    )
