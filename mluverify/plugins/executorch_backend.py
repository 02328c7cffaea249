"""Plugin: ExecuTorch with its XNNPACK delegate as targets ``executorch:xnnpack`` (float) and
``executorch:int8`` (PyTorch's own int8 path for devices), extra ``mluverify[executorch]``.

A third-party-style back end through the public plugin API, PyTorch's own path to devices: each
case's callable is captured whole by ``torch.export`` (a module from a copy in the case's
precision, its parameters constants of the graph), converted to the edge dialect, partitioned
and lowered by ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``, turned
into an ExecuTorch program (``.to_executorch()``: memory planning, the ``.pte`` buffer) and run
from that buffer by ExecuTorch's runtime (``executorch.runtime.Runtime``) on the CPU.

The XNNPACK partitioner delegates the ops XNNPACK has kernels for; the ops it leaves behind run
in ExecuTorch's portable kernels, op by op. The record says which:

- ``executed_as`` ``fused``: every op of the program in XNNPACK partitions;
- ``partially fused``: some ops left to the portable kernels (``fallback_ops``, named as ATen
  ops, and ``not_fused_reason`` list them); a single-op case whose op was left there is
  ``not_on_device``, not a pass;
- ``layer-by-layer``: XNNPACK took nothing (status ``not_fused``).

``Execution.info`` also holds ``partitions``, ``delegated_ops`` and ``portable_ops``.
``device_impl``: ``executorch 1.5.1 XNNPACK``; ``compile_s``: the export, lowering and program
build, kept out of the case's ``duration_s``. Judged by ``cnml`` like the other compilers.

``executorch:int8`` runs only the cases that ask for ``quant="int8"``, the seeds' quantized flow
on a real int8 runtime: the exported program is quantized by PT2E (``prepare_pt2e`` with
``XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=...))``,
calibrated on the case's inputs, ``convert_pt2e``), exported again, lowered with the XNNPACK
partitioner (its quantize / dequantize pairs become XNNPACK's int8 operators), saved as a
``.pte`` file (the offline model, ``save_pte``) and run from that file. Judged by ``cnml``, the
seeds' 2 % for quantized fused models; ``device_impl`` names quantizer, scheme and granularity.
A callable with nothing the quantizer annotates is refused (it would quantize nothing).

``ExecuTorchBackend(transform_passes=...)`` passes ExecuTorch's own edge-dialect transform
passes (``executorch.exir.pass_base.ExportPass`` subclasses), run before partitioning: a plugin
rewrites how an op reaches XNNPACK there. bfloat16 cases are refused (the XNNPACK delegate takes
none: every op would run in the portable kernels), and so are ``grad=True`` and, on
``executorch:xnnpack``, quantizations. ``ExecuTorchBackend(granularity="per-channel")``
quantizes the weights per channel (a plugin registers it in place of the default one).
"""
from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case, Target
from mluverify.core.hookspecs import hookimpl
from mluverify.core.provenance import is_view
from mluverify.errors import BackendError, Unsupported, valid_choice
from mluverify.plugins._exported import export_failure, export_program, exportable, timed
from mluverify.plugins._int8 import Int8Quantization, calibration_batches

if TYPE_CHECKING:
    import torch
    from torch.utils._pytree import TreeSpec

POLICY = "cnml"
INT8 = "int8"  # the quantized mode, and the quantization it runs
GRANULARITIES = ("per-tensor", "per-channel")
INSTALL = "pip install 'mluverify[executorch]'"
BFLOAT16_WHY = ("the XNNPACK delegate takes no bfloat16 (its partitioner leaves every bfloat16 op to the portable "
                "kernels); run bfloat16 cases on cpu:inductor")
# Edge-dialect ops that copy data in a layout or dtype rather than compute: named by the ATen
# op they replace, so a case's provenance counts them as plumbing (mluverify.core.provenance).
EDGE_PLUMBING = {"dim_order_ops::_to_dim_order_copy": "aten::_to_copy",
                 "dim_order_ops::_clone_dim_order": "aten::clone"}


@dataclass(frozen=True)
class Partitioning:
    """How a lowered program runs: ``partitions`` XNNPACK delegates computing ``delegated`` ops,
    ``portable`` ops left to ExecuTorch's portable kernels (ATen names, in graph order)."""

    partitions: int
    delegated: tuple[str, ...]
    portable: tuple[str, ...]

    def executed_as(self) -> tuple[str, str]:
        """(``Execution.executed_as``, ``not_fused_reason``)."""
        left = ", ".join(dict.fromkeys(self.portable))
        if not self.partitions:
            return "layer-by-layer", f"the XNNPACK partitioner delegated nothing; the portable kernels ran {left or 'it'}"
        if self.portable:
            return "partially fused", f"{self.partitions} XNNPACK partition(s); left to the portable kernels: {left}"
        return "fused", ""


class ExecuTorchBackend(Backend):
    """``executorch:xnnpack``: the case exported, lowered to ExecuTorch with the XNNPACK delegate
    and run by ExecuTorch's runtime.

    ``transform_passes``: ExecuTorch edge-dialect passes run before partitioning (the
    ``transform_passes`` of ``to_edge_transform_and_lower``).
    """

    name = "executorch"
    modes = {"xnnpack": POLICY, INT8: POLICY}
    quantizing_modes = (INT8,)
    calibrating_modes = (INT8,)  # on the case's calibration= set where it brings one
    compiling_modes = tuple(modes)  # an export, a lowering and a program build per case
    opaque_modes = tuple(modes)  # ExecuTorch's runtime and its delegate's kernels
    no_backward = "it runs an ExecuTorch inference program, which has no backward"

    def __init__(self, transform_passes: Sequence[Any] = (), granularity: str = "per-tensor") -> None:
        if granularity not in GRANULARITIES:
            raise valid_choice("executorch:int8 granularity", granularity, GRANULARITIES)
        self.transform_passes = list(transform_passes)
        self.granularity = granularity

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("executorch") else f"executorch not installed ({INSTALL})"

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        if case.mode == INT8 and not grad and case.quant != INT8:
            return (f"{case.target} runs int8 models only: ask for quant='int8' (the case asks for "
                    f"{case.quant or 'no quantization'!r}); run float cases on executorch:xnnpack")
        if case.mode == INT8 and case.dtype != "float32":
            return f"{case.target} quantizes a float32 model: the case's dtype is {case.dtype!r}"
        return super().refusal(fn, case, grad=grad) or (
            f"{case.target} does not compute in bfloat16: {BFLOAT16_WHY}" if case.dtype == "bfloat16" else None)

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        info: dict[str, Any] = {}
        args = dense(args)
        if case.mode != INT8:
            with timed(info):
                program, structure = flat_program(fn, kwargs, args, case)
                partitioning, buffer = self.compiled(program, case)
            return executed(buffer, partitioning, structure, args, case, info)
        batches, calibrated = calibration_batches(ExecuTorchInt8(granularity=self.granularity), args)
        with tempfile.TemporaryDirectory(prefix="executorch-int8-") as directory:
            with timed(info):  # export, calibration, quantization, lowering: the compile
                path, structure, partitioning = self.saved_int8(fn, args, kwargs, Path(directory) / "case.pte", case,
                                                                calibration=batches)
            execution = executed(path, partitioning, structure, args, case, info)
        info["device_impl"] += f" int8: {self.describe()}, {calibrated}"
        return execution

    def describe(self) -> str:
        """The record's words for the quantization: quantizer, scheme, granularity."""
        return (f"PT2E XNNPACKQuantizer symmetric config (int8 affine activations per tensor, int8 symmetric weights "
                f"{self.granularity})")

    def saved_int8(self, fn: Callable, args: tuple, kwargs: dict, path: Path, case: Case, *,
                   calibration: Sequence[Any] = ()) -> tuple[Path, "TreeSpec", Partitioning]:
        """The offline int8 model of ``fn(*args, **kwargs)`` written to ``path`` (a ``.pte``
        file), calibrated on the batches of ``calibration`` (each a tensor or a tuple of
        positional arguments; empty: on ``args``), with the structure of its outputs and its
        partitioning."""
        float_program, structure = flat_program(fn, kwargs, args, case)
        batches = tuple(calibration) or (args,)
        program = export_program(quantized(float_program, batches, self.granularity, case), args, case)
        partitioning, buffer = self.compiled(program, case)
        path.write_bytes(buffer)
        return path, structure, partitioning

    def compiled(self, program: "torch.export.ExportedProgram", case: Case) -> tuple[Partitioning, bytes]:
        """``program`` lowered to XNNPACK and built: how it was partitioned (read before the
        build, which rewrites the graph into out variants) and the ExecuTorch program's bytes."""
        edge = self.lowered(program, case)
        return partitioning_of(edge), built(edge, case)

    def lowered(self, program: "torch.export.ExportedProgram", case: Case) -> Any:
        """``program`` in the edge dialect after this back end's passes, partitioned and lowered
        to XNNPACK (an ``EdgeProgramManager``)."""
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        try:
            return to_edge_transform_and_lower(program, transform_passes=self.transform_passes or None,
                                               partitioner=[XnnpackPartitioner()])
        except Exception as exc:
            raise export_failure(case, "ExecuTorch cannot lower the exported program", exc) from exc


@dataclass(frozen=True, kw_only=True)
class ExecuTorchInt8(Int8Quantization):
    """The knobs of ``executorch:int8`` that the int8 targets share (granularity, calibration
    set: ``calibration_batches`` checks a per-channel set's size); layers kept in float are not
    offered (the XNNPACK quantizer's per-module configuration is not wired)."""

    target = "executorch:int8"


def quantized(program: "torch.export.ExportedProgram", batches: Sequence[Any], granularity: str, case: Case) -> Any:
    """``program``'s module quantized by PT2E with the XNNPACK quantizer's symmetric int8
    configuration, calibrated on ``batches`` (each a tensor or a tuple of the program's
    positional arguments; the converted module, quantize / dequantize ops
    around each annotated op). Unsupported where the quantizer annotated nothing."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                         get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=granularity == "per-channel")
    try:
        prepared = prepare_pt2e(program.module(), XNNPACKQuantizer().set_global(config))
        for batch in batches:  # calibration: the observers record the batches' ranges
            prepared(*(batch if isinstance(batch, (tuple, list)) else (batch,)))
        converted = convert_pt2e(prepared)
    except Exception as exc:
        raise export_failure(case, "PT2E quantization with the XNNPACKQuantizer failed", exc) from exc
    if not any("quantize_per" in str(node.target) for node in converted.graph.nodes):
        raise Unsupported(f"case {case.case_id}: the XNNPACKQuantizer annotates none of its ops (it quantizes "
                          f"convolutions, linear layers, matmuls, additions, ...), so quant='int8' would quantize nothing")
    return converted


def built(edge: Any, case: Case) -> bytes:
    """The ExecuTorch program (the ``.pte`` file's bytes) of a lowered edge program."""
    try:
        return edge.to_executorch().buffer
    except Exception as exc:
        raise export_failure(case, "ExecuTorch cannot build the program", exc) from exc


def flat_program(fn: Callable, kwargs: dict, args: tuple, case: Case) -> tuple["torch.export.ExportedProgram", "TreeSpec"]:
    """``fn(*args, **kwargs)`` exported with its outputs flattened to a tuple, and the structure
    to put them back into: an ExecuTorch program cannot hold an output structure that has no
    serialized name in torch's pytree registry (``torch.max(x, 1)``'s named tuple)."""
    from torch.utils import _pytree

    from mluverify.plugins._bound_call import BoundCall

    module, structure = exportable(fn, kwargs, case), []

    def flattened(*inputs: Any) -> tuple:
        leaves, spec = _pytree.tree_flatten(module(*inputs))
        structure.append(spec)
        return tuple(leaves)

    outer = BoundCall(flattened, {})
    outer.held = module  # registered as a submodule: its parameters are the program's, not stray constants
    program = export_program(outer, args, case)
    return program, structure[-1]


def executed(buffer: bytes | Path, partitioning: Partitioning, spec: "TreeSpec", args: tuple, case: Case,
             info: dict[str, Any]) -> Execution:
    """The case's Execution: ``buffer`` (a program, or its ``.pte`` file) run by ExecuTorch's
    runtime on ``args``, its outputs put back into the structure ``spec``, ``partitioning``
    saying how it ran, ``info`` completed with the release."""
    import torch
    from torch.utils import _pytree

    outputs = run_program(buffer, args, case)
    if spec.num_leaves != len(outputs):
        raise BackendError(f"case {case.case_id}: ExecuTorch returned {len(outputs)} outputs for the "
                           f"{spec.num_leaves} of the exported program")
    executed_as, why = partitioning.executed_as()
    info.update(device_impl=f"executorch {release()} XNNPACK", partitions=partitioning.partitions,
                delegated_ops=partitioning.delegated, portable_ops=partitioning.portable)
    with torch.no_grad():
        return Execution(_pytree.tree_unflatten(outputs, spec), fallback_ops=tuple(dict.fromkeys(partitioning.portable)),
                         executed_as=executed_as, not_fused_reason=why, info=info)


def save_pte(fn: Callable, args: tuple, path: str | Path, *, kwargs: dict | None = None,
             granularity: str = "per-tensor", calibration: Sequence[Any] = ()) -> Path:
    """The seeds' offline model on ExecuTorch: ``fn(*args, **kwargs)`` quantized to int8 (as
    ``executorch:int8`` does, calibrated on ``calibration``'s batches, else on ``args``), lowered
    to XNNPACK and written to ``path`` as a ``.pte`` file, which ``run_program`` (or any
    ExecuTorch runtime) loads."""
    case = Case("save_pte", getattr(fn, "__name__", type(fn).__name__), Target(ExecuTorchBackend.name, INT8), quant=INT8)
    batches, _ = calibration_batches(ExecuTorchInt8(granularity=granularity, calibration=tuple(calibration)), args)
    return ExecuTorchBackend(granularity=granularity).saved_int8(fn, args, kwargs or {}, Path(path), case,
                                                                 calibration=batches)[0]


def run_program(program: Any, args: tuple, case: Case) -> list:
    """Run the ``forward`` method of an ExecuTorch program (the ``.pte`` bytes or a path) on
    ``args`` with ExecuTorch's runtime; its outputs as CPU tensors."""
    import torch
    from executorch.runtime import Runtime

    inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in dense(args)]
    try:
        method = Runtime.get().load_program(program).load_method("forward")
        outputs = method.execute(inputs)
    except Exception as exc:
        raise export_failure(case, "ExecuTorch's runtime cannot run the program", exc) from exc
    return [output.clone() if isinstance(output, torch.Tensor) else output for output in outputs]


def dense(args: tuple) -> tuple:
    """``args`` with every tensor contiguous. A program keeps the layout (dim order) of the
    inputs it was exported with, and its runtime reads each input's data in that order whatever
    the tensor's strides: a channels-last or transposed input must be exported and fed alike."""
    import torch

    return tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in args)


def partitioning_of(edge: Any) -> Partitioning:
    """Which ops of a lowered edge program (before ``to_executorch``) the XNNPACK delegates
    compute, and which are left to the portable kernels (every call outside a delegate but the
    reads of a delegate's results)."""
    import operator

    from executorch.exir.lowered_backend_module import get_lowered_submodules

    graph_module = edge.exported_program().graph_module
    lowered = get_lowered_submodules(graph_module)
    delegated = [aten_name(node.target) for _, submodule, _ in lowered
                 for node in submodule.original_module.graph.nodes
                 if node.op == "call_function" and node.target is not operator.getitem]
    portable = [aten_name(node.target) for node in graph_module.graph.nodes
                if node.op == "call_function" and node.target is not operator.getitem
                and getattr(node.target, "__name__", "") != "executorch_call_delegate"]
    return Partitioning(len(lowered), tuple(delegated), tuple(portable))


def aten_name(op: Any) -> str:
    """An edge op's ATen name as the device reports fallbacks (``aten::add.Tensor``): a view's
    copying form (``view_copy``) by its view (``aten::view``), a dim-order copy by the copy it
    replaces (``EDGE_PLUMBING``)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return str(op)
    name = EDGE_PLUMBING.get(schema.name, schema.name)
    view = name.removesuffix("_copy")
    if name.endswith("_copy") and is_view(f"{view}.{schema.overload_name or 'default'}"):
        name = view
    return f"{name}.{schema.overload_name}" if schema.overload_name and name == schema.name else name


def release() -> str:
    """The installed ExecuTorch release (the package has no ``__version__``)."""
    from importlib.metadata import version

    return version("executorch")


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(ExecuTorchBackend())


__all__ = ["ExecuTorchBackend", "Partitioning", "partitioning_of", "run_program", "save_pte"]
