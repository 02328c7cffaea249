"""What the real int8 targets share (``ort:int8``, ``openvino:int8``): the mode, the options their
quantizers have in common (granularity, layers kept in float, calibration set) and how they are
checked, the calibration batches of a case, the cases they refuse, and the per-layer view: its
error table, its fusion-group comparisons (the report) and its ``FUSED_KERNEL_DEBUG`` dump pairs
(``mluverify dump-diff``).

Imports torch and pandas only inside its functions, as the plugins that use it do.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, Sequence, TypeVar

from mluverify.core.backends import GroupOutputs
from mluverify.core.calibration import checked_batches, current_calibration
from mluverify.core.case import Case
from mluverify.errors import InvalidArgument, valid_choice

if TYPE_CHECKING:
    import numpy
    import pandas
    import torch

INT8 = "int8"  # the mode, and the quantization it runs
GRANULARITIES = ("per-tensor", "per-channel")
# A per-channel scheme calibrated on a set other than the judged inputs needs this many samples.
# MinMax calibration takes each activation's range from the set; by exchangeability a new input
# exceeds the range of n samples with probability 1 / (n + 1), so 19 keeps that under 5 %. Per
# channel, the weights' own error shrinks until such clipping dominates the layer's error: a
# smaller set would spend the scheme's accuracy on clipped activations. The case's own inputs are
# exempt (the judged inputs are then inside the range by construction).
PER_CHANNEL_SAMPLES = 19
# /proc/cpuinfo flags of the int8 dot-product instructions (AVX512-VNNI, AVX-VNNI, AMX)
VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}


@dataclass(frozen=True, kw_only=True)
class Int8Quantization:
    """The options of an int8 target's quantizer that every runtime has: ``granularity`` of the
    weight scales (``"per-tensor"``, ``"per-channel"``), ``exclude``: layers kept in float (module
    names such as ``"layer1.0.conv1"``, or the runtime's node names), ``calibration``: the batches
    to calibrate on (each a tensor or a tuple of positional arguments) where the case brings no
    ``calibration=`` set of its own; empty: the case's own inputs. Subclasses add their runtime's knobs and list
    each knob's valid values in ``choices``."""

    target: ClassVar[str] = INT8
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"granularity": GRANULARITIES}

    granularity: str = "per-tensor"
    exclude: tuple[str, ...] = ()
    calibration: tuple[Any, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for knob, valid in self.choices.items():
            if getattr(self, knob) not in valid:
                raise valid_choice(f"{self.target} quantization {knob}", getattr(self, knob), valid)
        if isinstance(self.exclude, str):
            raise InvalidArgument(f"{self.target} quantization exclude={self.exclude!r} (type=str): give a tuple of "
                                  f"layer names, e.g. exclude=({self.exclude!r},)")
        object.__setattr__(self, "calibration", checked_batches(self.calibration, quant=INT8))

    def kept_in_float(self) -> str:
        """The record's words for ``exclude``."""
        return f", {len(self.exclude)} layer(s) in float" if self.exclude else ""


Chosen = TypeVar("Chosen", bound=Int8Quantization)


@contextlib.contextmanager
def quantizing_as(current: contextvars.ContextVar[Chosen], quantization: Chosen) -> Iterator[Chosen]:
    """Set ``current`` (a runtime's quantization context variable) to ``quantization`` inside the block."""
    token = current.set(quantization)
    try:
        yield quantization
    finally:
        current.reset(token)


def calibration_batches(quantization: Int8Quantization, args: tuple) -> tuple[tuple[Any, ...], str]:
    """The batches to calibrate on and the record's words for them: the case's ``calibration=``
    set (as ``verify``'s ``tolerance=`` over a marker, the case's own wins), else
    ``quantization``'s, else ``(args,)``. InvalidArgument where a per-channel scheme gets fewer
    samples than ``PER_CHANNEL_SAMPLES`` from a set."""
    batches = current_calibration() or quantization.calibration
    if not batches:
        return (args,), f"calibrated on the case's inputs ({samples((args,))} sample(s))"
    count = samples(batches)
    if quantization.granularity == "per-channel" and count < PER_CHANNEL_SAMPLES:
        raise InvalidArgument(f"{quantization.target} per-channel quantization needs at least {PER_CHANNEL_SAMPLES} "
                              f"calibration samples, the calibration set has {count}: give {PER_CHANNEL_SAMPLES - count} "
                              f"more, or granularity='per-tensor'")
    return batches, f"calibrated on {len(batches)} batch(es), {count} sample(s)"


def has_vnni(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies int8 with VNNI (or AMX) instructions, from ``cpuinfo``'s flags
    (a machine without the file is taken to have them). Without them, x86's int8 kernels sum u8 x
    s8 pairs into saturating int16 (``pmaddubsw``): 8-bit weights overflow it, and both runtimes
    document the remedy, 7-bit weights (onnxruntime's ``reduce_range``, NNCF's ``OverflowFix``).
    Measured on an AVX2-only EPYC: a 16-input Linear at root ratio 0.18 with 8-bit weights, 0.010
    with 7."""
    try:
        flags = set(Path(cpuinfo).read_text().split())
    except OSError:
        return True
    return bool(flags & VNNI_FLAGS)


def seven_bit_note(vnni: bool) -> str:
    """The record's words for 7-bit weights, appended to ``device_impl`` where the CPU has no VNNI."""
    return "" if vnni else "; 7-bit weights (this CPU has no VNNI: 8 would saturate its int16 sums)"


def model_inputs(batch: Any) -> list["numpy.ndarray"]:
    """A calibration batch (a tensor or a tuple of positional arguments) as the exported model's
    inputs: floating tensors in float32, the precision of the model quantized; integer and boolean
    ones (token ids, attention masks) in their own dtype, as the model's inputs are declared."""
    args = batch if isinstance(batch, (tuple, list)) else (batch,)
    return [(a.detach().float() if a.is_floating_point() else a.detach()).numpy() for a in args]


def samples(batches: Sequence[Any]) -> int:
    """How many samples ``batches`` hold: the first dimension of each batch's first tensor (1 for a 0-d one)."""
    firsts = [batch[0] if isinstance(batch, (tuple, list)) else batch for batch in batches]
    return sum(first.shape[0] if len(first.shape) else 1 for first in firsts)


def int8_refusal(case: Case, no_backward: str, *, grad: bool) -> str | None:
    """Why an int8 mode does not run ``case`` as asked, or None: it runs int8 models of float32
    callables, forward only."""
    if grad:
        return f"{case.target} does not run backward: {no_backward}"
    if case.quant != INT8:
        return (f"{case.target} runs int8 models only: ask for quant='int8' (the case asks for "
                f"{case.quant or 'no quantization'!r}); run float cases on {case.backend}'s float modes")
    if case.dtype != "float32":
        return f"{case.target} quantizes a float32 model: the case's dtype is {case.dtype!r}"
    return None


def layer_error_table(layers: Iterable[tuple[str, str, "torch.Tensor", "torch.Tensor"]]) -> "pandas.DataFrame":
    """The columns of the emulator's ``layer_errors`` from ``(layer, type, int8 output, float
    output)`` per quantized layer, in graph order."""
    import pandas as pd

    from mluverify.device.quantization._layer_errors import COLUMNS
    from mluverify.judge import metrics

    rows = []
    for layer, op_type, got, want in layers:
        scores = metrics(got, want)
        rows.append({"layer": layer, "type": op_type, "shape": tuple(got.shape),
                     "dtype": str(got.dtype).replace("torch.", ""),
                     **{key: scores[key] for key in ("rel_mse", "sqnr_db", "cosine")}})
    return pd.DataFrame(rows, columns=list(COLUMNS))


# What a layer's int8 output is compared with, for the reason of its record.
FLOAT_NODE = "the same node of the float model on the same inputs (the error of the layers before it included)"


def layer_groups(layers: Iterable[tuple[str, str, "torch.Tensor", "torch.Tensor"]]) -> tuple[GroupOutputs, ...]:
    """Each quantized layer ``(layer, type, int8 output, float output)`` as a fusion group of
    the fused int8 run (``Execution.groups``): each is judged and recorded as a comparison of
    kind ``group`` beside the case's output, as ``mlu:cnml``'s groups are; under
    ``FUSED_KERNEL_DEBUG=cpu`` (``mluverify.dump.dump_case``'s second run) each pair is also
    saved as the emulator saves its groups', where ``mluverify dump-diff`` judges it."""
    groups = tuple(GroupOutputs(layer, (op_type,), (got,), (want,), against=FLOAT_NODE)
                   for layer, op_type, got, want in layers)
    _save_debug_pairs(groups)
    return groups


def unseen_by_torch_modes() -> contextlib.ExitStack:
    """The runtime's work hidden from torch's dispatch and function modes (the Dumper's, when
    ``--mlu-dump=fail`` re-runs a case): its int8 kernels are no torch ops, and the exporter's
    tracing ops are not the case's. What a dump shows of a real int8 run is its layers' pairs."""
    from mluverify.dump import undumped

    return undumped()


def _save_debug_pairs(groups: tuple[GroupOutputs, ...]) -> None:
    """The layers' outputs written by the fused engine's own ``FUSED_KERNEL_DEBUG`` writer when
    that is set to ``cpu`` (the float model ran on the CPU): the dump-diff pair of each layer."""
    import os
    from pathlib import Path

    if os.environ.get("FUSED_KERNEL_DEBUG", "").strip().lower() != "cpu":
        return
    from mluverify.device.fusion.debug import DebugWriter

    writer = DebugWriter(Path(os.environ.get("FUSED_KERNEL_DEBUG_DIR", ".")), "cpu")
    for group in groups:
        writer.save(group.name, list(group.actual), list(group.expected), group.ops, group.against)


def name_of(fn: Any) -> str:
    """A callable's name for the cases of the functions called outside a run."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def unknown_layer(target: str, name: str, modules: Iterable[str]) -> InvalidArgument:
    """The error for a layer to keep in float that the model does not have, listing those it has."""
    return valid_choice(f"{target} layer to keep in float (exclude)", name,
                        sorted(modules) or ["(the model has no weighted layer)"])


__all__ = ["FLOAT_NODE", "GRANULARITIES", "INT8", "Int8Quantization", "PER_CHANNEL_SAMPLES", "calibration_batches",
           "int8_refusal", "layer_error_table", "layer_groups", "name_of", "quantizing_as", "samples", "unknown_layer",
           "unseen_by_torch_modes"]
