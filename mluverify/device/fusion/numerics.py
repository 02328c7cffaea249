"""Fused numerics: graph passes that make a fusion group compute like a MagicMind engine.

- ``bind_constants``: weights and buffers become constants of the group (not inputs), so they
  can be folded, and prepared (quantized, rounded) once by the kernels' weight cache.
- ``fold_conv_bn``: convolution + inference batch-norm become one convolution
  (``torch.nn.utils.fusion.fuse_conv_bn_weights``), as an inference engine does.
- ``compute_in_place``: an activation or addition whose first operand is a fresh intermediate
  used nowhere else overwrites it, as a fused engine reuses its buffers (no new allocations;
  values unchanged). Only where the device's kernels are the plain ATen ops (a plugin's
  kernel for the out-of-place op must run as it is).
- ``keep_storage_precision``: with a float16 model, the group computes in float32 but rounds
  every value-changing op's output to float16, as device memory between fused kernels holds it
  (rounding in float32 is fast on the CPU, float16 arithmetic is not).
- ``lower_to_device_ops``: the group is traced again (``make_fx`` on fake tensors), so that
  composite ops (``conv2d``, ``linear``, ``layer_norm``, ``softmax``, ``max_pool2d``,
  attention...) become the ops the device has kernels for (``convolution``, ``addmm``,
  ``native_layer_norm``, ``_softmax``, ``max_pool2d_with_indices``, ``bmm``...), as they do
  when the same model runs layer by layer; attention takes its math form.
- ``use_device_kernels``: every op runs the device's kernel for the fused (``cnml``) mode, as
  plugins registered it through ``mluverify_device_kernels`` (an op without a ``cnml`` kernel
  uses its ``cnnl`` one): the per-op numerics of a fused group (quantized conv / matmul,
  per-core reductions, the quantized layers' integer arithmetic) are the kernels', so a plugin
  can plant or fix a fused kernel. ``aten::convolution`` runs the
  ``aten::convolution_overrideable`` kernel (same arguments: the device's convolution entry).
  The group runs under ``kernel_mode("cnml")``, so its reductions use the core number.
"""
from __future__ import annotations

import functools
import operator
import warnings
from typing import Callable

import torch
from torch import fx
from torch.nn.utils.fusion import fuse_conv_bn_weights

from mluverify.device.fusion.exported import views_as_reshapes
from mluverify.device.fusion.settings import op_name

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
# Ops of a captured graph whose device kernel is registered under another name.
DEVICE_KERNEL_NAMES = {"aten::convolution": "aten::convolution_overrideable"}
KernelLookup = Callable[[str], "Callable | None"]
# Node meta key: the ATen op a node computed before the passes gave it a device kernel or its
# in-place form (what the group's graph on the CPU runs there, ``fusion.inner``).
ATEN_OP = "mluverify_aten_op"

# Ops whose output holds only values of their inputs (or constants exact in float16): rounding
# their output to the storage precision changes nothing, so it is skipped.
VALUE_PRESERVING = frozenset({
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
    """Compute in float32 with ``storage``-precision inputs, intermediates and outputs.

    A value the captured graph holds in a wider floating dtype (float32 beside a cast to
    float16, or the float32 result of float16/float32 promotion) keeps that dtype: only
    ``storage``-typed values are rounded, and each output leaves in its own dtype."""
    graph = group.graph
    for node in list(graph.nodes):
        if node.op == "placeholder":
            _insert_after(graph, node, cast_floating, torch.float32)
        elif node.op == "call_function" and node.target not in VALUE_PRESERVING:
            if _own_dtype(node, storage) == storage:
                _insert_after(graph, node, round_to, storage)
        elif node.op == "output":
            with graph.inserting_before(node):
                node.args = (fx.node.map_arg(node.args[0], lambda out: graph.call_function(
                    cast_floating, (out, _own_dtype(out, storage)))),)
    group.recompile()


def _own_dtype(node: fx.Node, storage: torch.dtype) -> torch.dtype:
    """The floating dtype of ``node``'s value in the captured graph (``storage`` if unknown)."""
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.dtype
    return storage


def _insert_after(graph: fx.Graph, node: fx.Node, fn, dtype: torch.dtype) -> None:
    users = list(node.users)
    with graph.inserting_after(node):
        converted = graph.call_function(fn, (node, dtype))
    for user in users:
        user.replace_input_with(node, converted)


@functools.cache
def _lowering_table() -> dict:
    from torch._decomp import get_decompositions

    # The CPU's fused attention kernel, in its math form (bmm, softmax): as the device runs it.
    return get_decompositions([aten._scaled_dot_product_flash_attention_for_cpu.default])


def lower_to_device_ops(group: fx.GraphModule) -> fx.GraphModule:
    """The group traced again down to the ops a device sees (composite ops decomposed); the
    group itself when it cannot be (an input without example metadata, a data-dependent op)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw as example_value

    examples = [n.meta.get("val") for n in group.graph.nodes if n.op == "placeholder"]
    if not all(isinstance(v, torch.Tensor) for v in examples):
        return group
    try:
        # A converted torch.jit module's graph has symbolic sizes: trace with their example values.
        inputs = [torch.empty_strided([example_value(n) for n in v.shape], [example_value(n) for n in v.stride()],
                                      dtype=v.dtype) for v in examples]
        # oneDNN off: an LSTM lowers to its cell ops (the device's kernels), not to the CPU's
        # mkldnn_rnn_layer, which is no device op.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracing through bound parameters warns about grad
            with torch.backends.mkldnn.flags(enabled=False):
                lowered = make_fx(group, decomposition_table=_lowering_table(), tracing_mode="fake",
                                  _allow_non_fake_inputs=True)(*inputs)
    except Exception:  # noqa: BLE001  any failure keeps the captured ops, which also run
        return group
    lowered.graph.eliminate_dead_code()
    views_as_reshapes(lowered)  # tracing turned reshapes into views valid for the example's strides only
    return lowered


def device_kernel(target: object, kernel_for: KernelLookup) -> Callable | None:
    """The device's fused-mode kernel for an fx call target (an op overload), or None."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    name = op_name(target)
    return kernel_for(DEVICE_KERNEL_NAMES.get(name, name))


def use_device_kernels(group: fx.GraphModule, kernel_for: KernelLookup) -> int:
    """Call ``kernel_for(op_name)`` (a CPU-tensor kernel, or None: the op stays as captured)
    instead of each op; return how many ops now run a kernel other than the ATen op itself."""
    replaced = 0
    for node in group.graph.nodes:
        kernel = device_kernel(node.target, kernel_for) if node.op == "call_function" else None
        if kernel is not None and kernel is not node.target:
            node.meta.setdefault(ATEN_OP, node.target)
            node.target = kernel
            replaced += 1
    group.recompile()
    return replaced


def compute_in_place(group: fx.GraphModule, kernel_for: KernelLookup) -> int:
    """Turn ops whose first operand is a fresh, otherwise unused intermediate into their
    in-place forms, where the device's kernels of both forms are the ATen ops themselves;
    return how many."""
    changed = 0
    for node in group.graph.nodes:
        operand = node.args[0] if node.op == "call_function" and node.args else None
        if (node.target in _IN_PLACE and isinstance(operand, fx.Node)
                and operand.target in _FRESH_RESULT and len(operand.users) == 1 and _holds_result(operand, node)
                and _plain_aten(node.target, kernel_for) and _plain_aten(_IN_PLACE[node.target], kernel_for)):
            node.meta.setdefault(ATEN_OP, node.target)
            node.target = _IN_PLACE[node.target]
            changed += 1
    group.recompile()
    return changed


def _holds_result(operand: fx.Node, node: fx.Node) -> bool:
    """Whether ``node``'s result fits in ``operand``'s memory: the same shape and dtype (a
    smaller operand the other one broadcasts, or a promoted dtype, cannot take it in place)."""
    held, result = operand.meta.get("val"), node.meta.get("val")
    return isinstance(held, torch.Tensor) and isinstance(result, torch.Tensor) \
        and held.shape == result.shape and held.dtype == result.dtype


def _plain_aten(op: torch._ops.OpOverload, kernel_for: KernelLookup) -> bool:
    """Whether ``op`` runs as itself on the device (its kernel is the ATen op, or it has none)."""
    return device_kernel(op, kernel_for) in (None, op)
