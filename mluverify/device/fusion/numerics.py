"""Fused numerics: graph passes that make a fusion group compute like a MagicMind engine.

- ``bind_constants``: weights and buffers become constants of the group (not inputs), so they
  can be folded and pre-rounded once, when the group is built.
- ``use_device_kernels``: ops from outside ATen (the quantized conv / linear) run the device's
  ``cnml`` kernel, which holds their device semantics (exact integer arithmetic).
- ``fold_conv_bn``: convolution + inference batch-norm become one convolution
  (``torch.nn.utils.fusion.fuse_conv_bn_weights``), as an inference engine does.
- ``reduce_matmul_precision``: float32 conv / matmul inputs rounded to the numerics profile's
  mantissa bits (TF32-like on MLU370), weights once when the group is built.
- ``compute_in_place``: an activation or addition whose first operand is a fresh intermediate
  used nowhere else overwrites it, as a fused engine reuses its buffers (no new allocations;
  values unchanged).
- ``keep_storage_precision``: with a float16 model, the group computes in float32 but rounds
  every value-changing op's output to float16, as device memory between fused kernels holds it
  (rounding in float32 is fast on the CPU, float16 arithmetic is not).
"""
from __future__ import annotations

import operator
from typing import Callable

import torch
from torch import fx
from torch.nn.utils.fusion import fuse_conv_bn_weights

from mluverify.device.fusion import _device

aten = torch.ops.aten

_CONVOLUTIONS = (aten.conv2d.default, aten.convolution.default)
_INFERENCE_BATCH_NORM = aten._native_batch_norm_legit_no_training.default
# Ops whose result no other live value shares: new tensors, and in-place ops (this pass only
# makes them overwrite such a result); and the in-place forms of the ops that may overwrite one
# when it has no other user.
_FRESH_RESULT = frozenset({
    aten.conv2d.default, aten.convolution.default, aten.linear.default, aten.addmm.default,
    aten.add.Tensor, aten.mul.Tensor, aten.relu.default,
    aten.add_.Tensor, aten.mul_.Tensor, aten.relu_.default, aten.hardtanh_.default,
})
_IN_PLACE = {aten.relu.default: aten.relu_.default, aten.add.Tensor: aten.add_.Tensor,
             aten.mul.Tensor: aten.mul_.Tensor, aten.hardtanh.default: aten.hardtanh_.default}
# Argument positions of the factors of conv / matmul ops (biases are added in float32).
_MATMUL_FACTORS = {
    aten.conv2d.default: (0, 1), aten.convolution.default: (0, 1), aten.linear.default: (0, 1),
    aten.mm.default: (0, 1), aten.addmm.default: (1, 2),
}

# Ops whose output holds only values of their inputs (or constants exact in float16): rounding
# their output to the storage precision changes nothing, so it is skipped.
_VALUE_PRESERVING = frozenset({
    operator.getitem, aten.relu.default, aten.relu_.default, aten.hardtanh.default,
    aten.hardtanh_.default, aten.max_pool2d.default, aten.max_pool2d_with_indices.default,
    aten.transpose.int, aten.permute.default, aten.view.default, aten.reshape.default,
    aten._unsafe_view.default, aten.flatten.using_ints, aten.expand.default, aten.clone.default,
    aten.cat.default, aten.slice.Tensor, aten.select.int, aten.squeeze.dim, aten.unsqueeze.default,
    aten.t.default, aten.contiguous.default, aten.alias.default,
})


def bind_constants(group: fx.GraphModule, constants: dict[int, torch.Tensor]) -> None:
    """Turn the placeholders at the given positions into constants of the group, held in float32.

    Constants are plain attributes, not buffers, on purpose: moving the parent module to the
    device must leave them as CPU tensors.
    """
    placeholders = [n for n in group.graph.nodes if n.op == "placeholder"]
    for index, value in constants.items():
        name = f"_constant{index}"
        setattr(group, name, value.float() if value.is_floating_point() else value)
        with group.graph.inserting_before(placeholders[index]):
            attribute = _get_attr(group.graph, name)
        placeholders[index].replace_all_uses_with(attribute)
        group.graph.erase_node(placeholders[index])
    group.recompile()


def fold_conv_bn(group: fx.GraphModule) -> int:
    """Fold every inference batch-norm that follows a constant-weight convolution; return how many."""
    folded = 0
    for bn in [n for n in group.graph.nodes if n.target is _INFERENCE_BATCH_NORM]:
        conv = bn.args[0]
        if _foldable(group, conv, bn):
            _fold(group, conv, bn, index=folded)
            folded += 1
    group.graph.eliminate_dead_code()
    group.recompile()
    return folded


def _constant(group: fx.GraphModule, node: object) -> torch.Tensor | None:
    """The value of a ``get_attr`` node (None for ``None``); raises LookupError for anything else."""
    if node is None:
        return None
    if isinstance(node, fx.Node) and node.op == "get_attr":
        return getattr(group, node.target)
    raise LookupError(node)


def _get_attr(graph: fx.Graph, name: str) -> fx.Node:
    # ``Graph.get_attr`` warns about attributes that are not registered buffers; ours are plain
    # attributes on purpose (see ``bind_constants``).
    return graph.create_node("get_attr", name)


def _foldable(group: fx.GraphModule, conv: object, bn: fx.Node) -> bool:
    if not (isinstance(conv, fx.Node) and conv.target in _CONVOLUTIONS and len(conv.users) == 1):
        return False
    if conv.target is aten.convolution.default and conv.args[6]:
        return False  # transposed convolutions keep their batch-norm
    if any(user.target is not operator.getitem or user.args[1] != 0 for user in bn.users):
        return False
    try:
        _constant(group, conv.args[1])
        _constant(group, conv.args[2] if len(conv.args) > 2 else None)
        for value in bn.args[1:5]:
            _constant(group, value)
    except LookupError:
        return False
    return True


def _fold(group: fx.GraphModule, conv: fx.Node, bn: fx.Node, index: int) -> None:
    weight = _constant(group, conv.args[1])
    bias = _constant(group, conv.args[2] if len(conv.args) > 2 else None)
    bn_weight, bn_bias, mean, var = (_constant(group, a) for a in bn.args[1:5])
    eps = bn.args[6]
    new_weight, new_bias = fuse_conv_bn_weights(weight, bias, mean, var, eps, bn_weight, bn_bias)
    setattr(group, f"_folded_weight{index}", new_weight.detach())
    setattr(group, f"_folded_bias{index}", new_bias.detach())
    args = list(conv.args) + [None] * (3 - len(conv.args))
    with group.graph.inserting_before(conv):
        args[1] = _get_attr(group.graph, f"_folded_weight{index}")
        args[2] = _get_attr(group.graph, f"_folded_bias{index}")
    conv.args = tuple(args)
    for user in list(bn.users):
        user.replace_all_uses_with(conv)
        group.graph.erase_node(user)
    group.graph.erase_node(bn)


def round_to(value: object, dtype: torch.dtype) -> object:
    """Round floating tensors (also inside tuples/lists) to ``dtype``, keeping them float32."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype).float() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(round_to(v, dtype) for v in value)
    return value


def cast_floating(value: object, dtype: torch.dtype) -> object:
    """Cast floating tensors (also inside tuples/lists) to ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(cast_floating(v, dtype) for v in value)
    return value


def round_constants(group: fx.GraphModule, storage: torch.dtype) -> None:
    """Round every floating constant of the group to ``storage``, once (they stay float32)."""
    for node in group.graph.nodes:
        if node.op == "get_attr":
            setattr(group, node.target, round_to(getattr(group, node.target), storage))


def keep_storage_precision(group: fx.GraphModule, storage: torch.dtype) -> None:
    """Compute in float32 with ``storage``-precision inputs, intermediates and outputs."""
    graph = group.graph
    for node in list(graph.nodes):
        if node.op == "placeholder":
            _insert_after(graph, node, cast_floating, torch.float32)
        elif node.op == "call_function" and node.target not in _VALUE_PRESERVING:
            _insert_after(graph, node, round_to, storage)
        elif node.op == "output":
            with graph.inserting_before(node):
                node.args = (graph.call_function(cast_floating, (node.args[0], storage)),)
    group.recompile()


def _insert_after(graph: fx.Graph, node: fx.Node, fn, dtype: torch.dtype) -> None:
    users = list(node.users)
    with graph.inserting_after(node):
        converted = graph.call_function(fn, (node, dtype))
    for user in users:
        user.replace_input_with(node, converted)


def reduce_matmul_precision(group: fx.GraphModule, bits: int) -> None:
    """Round conv / matmul factors to ``bits`` mantissa bits: constants now, activations per call."""
    for node in list(group.graph.nodes):
        for position in _MATMUL_FACTORS.get(node.target, ()):
            factor = node.args[position]
            if factor.op == "get_attr":
                setattr(group, factor.target, _device.round_mantissa(getattr(group, factor.target), bits))
            else:
                with group.graph.inserting_before(node):
                    rounded = group.graph.call_function(_device.round_mantissa, (factor, bits))
                node.update_arg(position, rounded)
    group.recompile()


def use_device_kernels(group: fx.GraphModule, kernel_for: Callable[[str], Callable | None]) -> None:
    """Call ``kernel_for(op_name)`` (a CPU-tensor kernel, or None) instead of non-ATen ops."""
    for node in group.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
                and node.target.namespace != "aten":
            kernel = kernel_for(node.target.name())
            if kernel is not None:
                node.target = kernel
    group.recompile()


def compute_in_place(group: fx.GraphModule) -> int:
    """Turn ops whose first operand is a fresh, otherwise unused intermediate into their
    in-place forms; return how many."""
    changed = 0
    for node in group.graph.nodes:
        operand = node.args[0] if node.op == "call_function" and node.args else None
        if (node.target in _IN_PLACE and isinstance(operand, fx.Node)
                and operand.target in _FRESH_RESULT and len(operand.users) == 1):
            node.target = _IN_PLACE[node.target]
            changed += 1
    group.recompile()
    return changed
