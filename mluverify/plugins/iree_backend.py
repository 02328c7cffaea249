"""Plugin: IREE compiling for its ``llvm-cpu`` back end, run on the CPU, as target ``iree:cpu``
(extra ``mluverify[iree]``).

A third-party-style back end through the public plugin API. Each case's callable is captured
whole by ``torch.export`` (a module from a copy in the case's precision, its parameters
constants of the graph), decomposed by iree-turbine's own AOT decomposition table (as
``iree.turbine.aot.export(module, args)`` does for a module), imported into MLIR's ``torch``
dialect by ``iree.turbine.aot.export``, compiled by ``iree-compile`` for ``llvm-cpu`` with code
for this machine's CPU (``--iree-llvmcpu-target-cpu=host``) and run by ``iree.runtime`` on its
``local-task`` driver. IREE compiles a program whole or not at all: an op it cannot legalize
errors the case with the compiler's ``error:`` line, nothing is left to torch (``executed_as``
``fused``). Judged by ``cnml`` like the other compilers.

Precision: each op computes in the case's dtype. IREE's input pipeline demotes float64 to
float32 unless told otherwise (``--iree-input-demote-f64-to-f32``, on by default); it is turned
off here, so a float64 program computes in float64 as asked. bfloat16 crosses as
``ml_dtypes.bfloat16`` arrays (IREE computes it); unsigned integers come back from IREE's
signless integers with their bits and are read as the program's dtype.

The record's ``device_impl`` names the compiler and the target
(``iree-base-compiler 3.13.0 llvm-cpu host, iree-turbine 3.9.0``); ``compile_s``: the export,
the import, the compile (a subprocess: a compiler crash errors the case, not the run) and
loading the module, kept out of the case's ``duration_s``.

``IreeBackend(decompositions=...)`` adds aten ops mapped to Python functions that decompose them
before the import (torch's ``run_decompositions`` table: how an op reaches IREE);
``IreeBackend(flags=...)`` adds ``iree-compile`` flags. ``grad=True`` and quantizations are
refused.
"""
from __future__ import annotations

from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import BackendError
from mluverify.plugins._exported import export_failure, export_program, exportable, timed
from mluverify.plugins.ort_backend import missing

if TYPE_CHECKING:
    import numpy
    import torch

POLICY = "cnml"
TARGET_BACKEND = "llvm-cpu"
# Code for the CPU the runtime runs on; float64 kept (IREE demotes it to float32 by default).
FLAGS = ("--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false")
DRIVER = "local-task"  # the runtime's multithreaded CPU driver
REQUIRED = ("iree.compiler", "iree.runtime", "iree.turbine")


class IreeBackend(Backend):
    """``iree:cpu``: the case exported, imported by iree-turbine, compiled by IREE for
    ``llvm-cpu`` and run by the IREE runtime on the CPU.

    ``decompositions``: aten ops (``torch.ops.aten.relu.default``) mapped to functions that
    decompose them before the import, over iree-turbine's own table. ``flags``: more
    ``iree-compile`` flags, after ``FLAGS``.
    """

    name = "iree"
    modes = {"cpu": POLICY}
    compiling_modes = ("cpu",)  # an export, an import and a compile per case
    opaque_modes = ("cpu",)  # IREE's compiled program
    no_backward = "it runs a compiled inference program, which has no backward"

    def __init__(self, decompositions: Mapping[Any, Callable] | None = None, flags: Sequence[str] = ()) -> None:
        self.decompositions = dict(decompositions or {})
        self.flags = tuple(flags)

    def unavailable_reason(self) -> str | None:
        return missing(REQUIRED, "iree")

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import torch
        from torch.utils import _pytree

        info: dict[str, Any] = {}
        with timed(info):
            program = self._decomposed(export_program(exportable(fn, kwargs, case), args, case), case)
            main = self._compile(program, case)
        # torch.export takes the tensors of the call as the program's inputs, and its other
        # arguments (Python numbers) as constants of the graph
        inputs = [_to_iree(a) for a in _pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
        try:
            results = main(*inputs)
        except Exception as exc:
            raise export_failure(case, "the IREE runtime cannot run the compiled program", exc) from exc
        results = results if isinstance(results, (tuple, list)) else () if results is None else (results,)
        spec = program.call_spec.out_spec
        if spec.num_leaves != len(results):
            raise BackendError(f"case {case.case_id}: IREE returned {len(results)} outputs for the "
                               f"{spec.num_leaves} of the exported program")
        outputs = [_from_iree(r.to_host(), dtype) for r, dtype in zip(results, _output_dtypes(program))]
        info["device_impl"] = (f"iree-base-compiler {version('iree-base-compiler')} {TARGET_BACKEND} host, "
                               f"iree-turbine {version('iree-turbine')}")
        return Execution(_pytree.tree_unflatten(outputs, spec), executed_as="fused", info=info)

    def _decomposed(self, program: "torch.export.ExportedProgram", case: Case) -> "torch.export.ExportedProgram":
        """``program`` with iree-turbine's AOT decompositions and this back end's own applied."""
        from iree.turbine.aot import current_aot_decompositions

        try:
            return program.run_decompositions({**current_aot_decompositions(), **self.decompositions})
        except Exception as exc:
            raise export_failure(case, "decomposing the exported program failed", exc) from exc

    def _compile(self, program: "torch.export.ExportedProgram", case: Case) -> Callable:
        """``program`` imported by iree-turbine and compiled by ``iree-compile`` for
        ``TARGET_BACKEND``, loaded into the runtime: its entry function."""
        import io

        import iree.compiler
        import iree.runtime
        from iree.turbine import aot

        try:
            bytecode = io.BytesIO()
            aot.export(program).mlir_module.write_bytecode(bytecode)
        except Exception as exc:
            raise export_failure(case, "iree-turbine cannot import the program", exc) from exc
        try:
            binary = iree.compiler.compile_str(bytecode.getvalue(), target_backends=[TARGET_BACKEND],
                                               extra_args=[*FLAGS, *self.flags])
        except iree.compiler.CompilerToolError as exc:
            raise export_failure(case, f"iree-compile failed for {TARGET_BACKEND}",
                                 RuntimeError(_compiler_error(str(exc)))) from exc
        return iree.runtime.load_vm_flatbuffer(binary, driver=DRIVER).main


def _compiler_error(diagnostics: str) -> str:
    """The first ``error:`` line of iree-compile's diagnostics, without the source location
    before it (the test file's path), else the first line."""
    errors = [line.split("error:", 1)[1].strip() for line in diagnostics.splitlines() if "error:" in line]
    return errors[0] if errors else diagnostics.strip().splitlines()[0]


def _output_dtypes(program: "torch.export.ExportedProgram") -> list[Any]:
    """The dtype of each user output of ``program`` (None for one that is not a tensor)."""
    from torch.export.graph_signature import OutputKind

    returned = program.graph_module.graph.find_nodes(op="output")[0].args[0]
    return [getattr(getattr(node, "meta", {}).get("val"), "dtype", None)
            for node, spec in zip(returned, program.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]


def _to_iree(tensor: "torch.Tensor") -> "numpy.ndarray":
    import ml_dtypes
    import torch

    values = tensor.detach().contiguous()
    if values.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, as ml_dtypes' bfloat16
        return values.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return values.numpy()


def _from_iree(array: "numpy.ndarray", dtype: "torch.dtype | None") -> "torch.Tensor":
    """A torch tensor of its own in the program's ``dtype``: bfloat16 from its bits, an unsigned
    integer from the signless one of the same width IREE returns (int8 for uint8), by its bits."""
    import ml_dtypes
    import numpy
    import torch

    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(numpy.int16).copy()).view(torch.bfloat16)
    values = torch.from_numpy(numpy.array(array))
    same_width_integers = (dtype is not None and values.dtype != dtype and not dtype.is_floating_point
                           and not values.dtype.is_floating_point and values.element_size() == dtype.itemsize
                           and torch.bool not in (dtype, values.dtype))
    return values.view(dtype) if same_width_integers else values


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(IreeBackend())


__all__ = ["IreeBackend"]
