"""Which ATen ops are "the op under test" of a case, and whether one of them ran on the CPU.

A case names its op in words (``softmax``, ``sum_dim``, ``conv2d``, ``resnet50``); the device
reports the ATen ops that fell back to the CPU (``aten::_softmax``, ``aten::clamp.Tensor``).
The rule, in order:

1. ``Case.aten_ops`` (``verify(..., aten_ops=("aten::clamp.Tensor",))``) when the case
   declares them: exactly those overloads (or every overload of a bare ``aten::clamp``);
2. else ``ALIASES``: torch-level names whose ATen ops have other names (``linear`` ->
   ``addmm``/``mm``; ``layer_norm`` -> ``native_layer_norm``);
3. else the name itself: a fallback op matches when its name without namespace, overload and
   leading underscores (``aten::_log_softmax`` -> ``log_softmax``) equals the case's op, or
   one is the other followed by ``_<suffix>`` (``sum_dim`` ~ ``sum``; ``max_pool2d`` ~
   ``max_pool2d_with_indices``).

A network case (``resnet50``) matches no single ATen op: its fallbacks are provenance, not a
verdict on the op under test.
"""
from __future__ import annotations

from typing import Iterable

from mluverify.core.case import Case

# Torch-level op names -> the ATen op names (without namespace and overload) that compute them.
ALIASES: dict[str, tuple[str, ...]] = {
    "linear": ("linear", "addmm", "mm", "matmul", "bmm"),
    "matmul": ("matmul", "mm", "bmm", "addmm", "addmv", "mv", "dot", "vdot"),
    "conv1d": ("convolution", "convolution_overrideable", "conv1d"),
    "conv2d": ("convolution", "convolution_overrideable", "conv2d"),
    "conv3d": ("convolution", "convolution_overrideable", "conv3d"),
    "conv_transpose1d": ("convolution", "convolution_overrideable", "conv_transpose1d"),
    "conv_transpose2d": ("convolution", "convolution_overrideable", "conv_transpose2d"),
    "conv_transpose3d": ("convolution", "convolution_overrideable", "conv_transpose3d"),
    "batch_norm": ("batch_norm", "native_batch_norm", "native_batch_norm_legit",
                   "native_batch_norm_legit_no_training"),
    "layer_norm": ("layer_norm", "native_layer_norm"),
    "group_norm": ("group_norm", "native_group_norm"),
    "embedding": ("embedding", "index_select"),
    "lstm": ("lstm", "thnn_fused_lstm_cell"),
    "gru": ("gru", "thnn_fused_gru_cell"),
    "interpolate": ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
                    "upsample_bilinear2d", "upsample_linear1d", "upsample_trilinear3d"),
}


# ATen names of torch.special / torch.linalg / torch.fft functions carry the module as a prefix.
SUBMODULE_PREFIXES = ("special_", "linalg_", "fft_")


def packet_name(aten_op: str) -> str:
    """``"aten::_log_softmax.out"`` -> ``"log_softmax"``, ``"aten::special_erfcx"`` -> ``"erfcx"``:
    no namespace, overload, leading ``_`` or torch sub-module prefix."""
    name = aten_op.rpartition("::")[2].partition(".")[0].lstrip("_")
    for prefix in SUBMODULE_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _related(op: str, packet: str) -> bool:
    return op == packet or op.startswith(packet + "_") or packet.startswith(op + "_")


def is_op_under_test(case: Case, aten_op: str) -> bool:
    """Whether ``aten_op`` (a fallback's name, ``aten::clamp.Tensor``) computes ``case``'s op."""
    if case.aten_ops:
        return any(aten_op == declared or ("." not in declared.rpartition("::")[2]
                                           and aten_op.partition(".")[0] == declared)
                   for declared in case.aten_ops)
    op = case.op.lower()
    packet = packet_name(aten_op)
    aliases = ALIASES.get(op)
    if aliases is not None:
        return packet in aliases
    return _related(op, packet)


def ops_under_test_on_cpu(case: Case, fallback_ops: Iterable[str]) -> tuple[str, ...]:
    """The fallback ops (in order) that computed the op under test on the CPU."""
    return tuple(op for op in fallback_ops if is_op_under_test(case, op))
