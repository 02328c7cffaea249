"""Plugin: Apache TVM (Relax, compiled for ``llvm``) on the CPU as target ``tvm:cpu`` (extra
``mluverify[tvm]``).

A third-party-style back end through the public plugin API. Each case's callable is captured
whole by ``torch.export`` (a module from a copy in the case's precision, its parameters
constants of the graph), imported into a Relax module by TVM's own PyTorch front end
(``tvm.relax.frontend.torch.from_exported_program``, which first runs PyTorch's decompositions
on the program), compiled by ``tvm.compile`` for the ``llvm`` target with the default Relax
and TIR pipelines (operator fusion, TIR kernels compiled by LLVM for this CPU) and run by the
Relax virtual machine. Nothing of the program is left to torch: an op the front end has no
converter for errors the case with TVM's message, so a case that runs ran as one compiled
program (``executed_as`` ``fused``). Judged by ``cnml`` like the other compilers.

The record's ``device_impl`` names TVM's release and the target (``apache-tvm 0.27.0.post1
relax llvm``); ``compile_s``: the export, the import into Relax, the build and loading the VM,
kept out of the case's ``duration_s``. Nothing is cached across cases: each case is a program
of its own shapes and dtypes, built afresh.

Tensors cross to and from TVM by DLPack, so bfloat16 crosses as it is (TVM computes it).
``TvmBackend(convert_map=...)`` passes the front end's ``custom_convert_map`` (an aten op's
name, ``"relu.default"``, mapped to a converter that emits the Relax it becomes).
``grad=True`` and quantizations are refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import BackendError
from mluverify.plugins._exported import export_failure, export_program, exportable, timed
from mluverify.plugins.ort_backend import missing

if TYPE_CHECKING:
    import torch
    import tvm

POLICY = "cnml"
TARGET = "llvm"  # TVM's CPU code generator, for the host the VM runs on


class TvmBackend(Backend):
    """``tvm:cpu``: the case exported, imported into Relax, built for ``llvm`` by TVM and run
    in the Relax VM.

    ``convert_map``: converters for TVM's PyTorch front end (``custom_convert_map``): an aten
    op's name (``"relu.default"``) mapped to ``fn(node, importer) -> relax.Var``, used instead
    of the front end's own for that op.
    """

    name = "tvm"
    modes = {"cpu": POLICY}
    compiling_modes = ("cpu",)  # an export, an import into Relax and a build per case
    opaque_modes = ("cpu",)  # the Relax VM's compiled program
    no_backward = "it runs a compiled inference program, which has no backward"

    def __init__(self, convert_map: Mapping[str, Callable] | None = None) -> None:
        self.convert_map = dict(convert_map or {})

    def unavailable_reason(self) -> str | None:
        return missing(("tvm",), "tvm")

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import torch
        import tvm
        from torch.utils import _pytree

        module, tensors = _of_tensors(exportable(fn, kwargs, case), args)
        info: dict[str, Any] = {}
        with timed(info):
            program = export_program(module, tensors, case)
            main = self._compile(program, case)
        try:
            results = main(*map(_to_tvm, tensors))
        except Exception as exc:
            raise export_failure(case, "the Relax VM cannot run the compiled program", exc) from exc
        outputs = [_from_tvm(r) for r in _leaves(results)]
        spec = program.call_spec.out_spec
        if spec.num_leaves != len(outputs):
            raise BackendError(f"case {case.case_id}: TVM returned {len(outputs)} outputs for the "
                               f"{spec.num_leaves} of the exported program")
        info["device_impl"] = f"apache-tvm {tvm.__version__} relax {TARGET}"
        return Execution(_pytree.tree_unflatten(outputs, spec), executed_as="fused", info=info)

    def _compile(self, program: "torch.export.ExportedProgram", case: Case) -> Callable:
        """``program`` imported into Relax by TVM's PyTorch front end, built for ``TARGET``: the
        VM's entry function."""
        import tvm
        from tvm.relax.frontend.torch import from_exported_program

        try:
            module = from_exported_program(program, custom_convert_map=self.convert_map or None)
        except Exception as exc:
            raise export_failure(case, "TVM's PyTorch front end cannot import the program", exc) from exc
        try:
            return tvm.relax.VirtualMachine(tvm.compile(module, target=TARGET), tvm.cpu())["main"]
        except Exception as exc:
            raise export_failure(case, f"tvm.compile failed for {TARGET}", exc) from exc


def _of_tensors(module: "torch.nn.Module", args: tuple) -> tuple["torch.nn.Module", tuple]:
    """``module`` as a module of the tensors among ``args`` (nested ones included), its other
    arguments (Python numbers, ``None``) bound as constants, and those tensors: TVM's front end
    takes a program's inputs as tensors only (a float input fails its import)."""
    import torch
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(args)
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    class OfTensors(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = module

        def forward(self, *tensors: torch.Tensor) -> Any:
            filled = list(leaves)
            for i, tensor in zip(where, tensors):
                filled[i] = tensor
            return self.module(*_pytree.tree_unflatten(filled, spec))

    return OfTensors(), tuple(leaves[i] for i in where)


def _leaves(result: Any) -> list:
    """A Relax result as a flat list: one tensor, or the items of a (nested) TVM array."""
    import tvm

    if isinstance(result, tvm.runtime.Tensor):
        return [result]
    return [leaf for item in result for leaf in _leaves(item)]


def _to_tvm(tensor: "torch.Tensor") -> "tvm.runtime.Tensor":
    """A copy of ``tensor`` in memory TVM allocated: its kernels take only 64-byte aligned data
    (DLPack would share a torch tensor's memory, which a view or a small tensor does not align)."""
    import torch
    import tvm

    copy = tvm.runtime.empty(tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), tvm.cpu())
    torch.from_dlpack(copy).copy_(tensor)  # written through a view of TVM's memory
    return copy


def _from_tvm(tensor: "tvm.runtime.Tensor") -> "torch.Tensor":
    """A torch tensor of its own (by DLPack, then copied: TVM's memory is not kept)."""
    import torch

    return torch.from_dlpack(tensor).clone()


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(TvmBackend())


__all__ = ["TvmBackend"]
