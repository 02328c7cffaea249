"""Plugin: OpenVINO's CPU plugin as targets ``openvino:cpu`` and ``openvino:default`` (extra
``mluverify[openvino]``).

A third-party-style back end through the public plugin API. Each case's callable is captured
whole by ``torch.export`` (a module from a copy in the case's precision, its parameters
constants of the graph), converted by ``openvino.convert_model`` (the PyTorch front end's
``torch.fx`` path), its inputs fixed to the case's shapes, compiled by ``openvino.Core`` for
the ``CPU`` device and run there. A program runs on OpenVINO whole or not at all: an op the
converter has no rule for errors the case with the converter's report, there is no eager
fallback (``executed_as`` is ``fused``, one compiled program).

The modes differ in the CPU plugin's inference precision:

- ``openvino:cpu``: ``INFERENCE_PRECISION_HINT`` ``f32``, layers compute in the model's
  precision (float32 cases in float32); judged by ``cnml`` like the other compilers;
- ``openvino:default``: no hint, the plugin's own choice for this CPU: bf16 on CPUs with AMX
  or AVX512-BF16 (matmuls and convolutions of a float32 model run in bfloat16), f32 elsewhere.
  Judged by ``cnml``, the bound of the fused and quantized modes (docs/backends.md gives the
  errors measured on the op suite).

The record names the precision the compiled program was given (``device_impl``:
``openvino 2026.4.1 CPU bf16``); ``compile_s``: the export, conversion and compile.

``OpenVinoBackend(extensions=...)`` passes OpenVINO's own front-end extensions to
``convert_model`` (``openvino.frontend.pytorch.ConversionExtension("aten.relu.default", fn)``
replaces how an op is lowered). bfloat16 inputs and outputs cross as their bits (numpy has no
bfloat16); ``grad=True`` and quantizations are refused.
"""
from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Callable, Sequence

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import BackendError
from mluverify.plugins._exported import export_failure, export_program, exportable, timed

if TYPE_CHECKING:
    import openvino
    import torch

POLICY = "cnml"
INSTALL = "pip install 'mluverify[openvino]'"
# mode -> the CPU plugin's configuration; "default" leaves the inference precision to the plugin
CONFIGS: dict[str, dict[str, str]] = {"cpu": {"INFERENCE_PRECISION_HINT": "f32"}, "default": {}}


class OpenVinoBackend(Backend):
    """``openvino:cpu`` (float32 inference precision) and ``openvino:default`` (the CPU
    plugin's default precision): the case exported, converted and compiled by OpenVINO.

    ``extensions``: OpenVINO front-end extensions for ``convert_model`` (conversion rules that
    replace the converter's own for an op).
    """

    name = "openvino"
    modes = {mode: POLICY for mode in CONFIGS}
    compiling_modes = tuple(CONFIGS)  # an export, a conversion and a compile per case
    no_backward = "it runs a converted inference graph, which has no backward"

    def __init__(self, extensions: Sequence[Any] = ()) -> None:
        self.extensions = list(extensions)

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("openvino") else f"openvino not installed ({INSTALL})"

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import openvino
        import torch
        from torch.utils import _pytree

        info: dict[str, Any] = {}
        with timed(info):
            program = export_program(exportable(fn, kwargs, case), args, case)
            compiled = self._compile(program, args, case)
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        try:
            request = compiled.create_infer_request()
            request.infer([_to_openvino(a) for a in args])
            outputs = [_from_openvino(request.get_tensor(output)) for output in compiled.outputs]
        except Exception as exc:
            raise export_failure(case, "OpenVINO cannot run the compiled program", exc) from exc
        spec = program.call_spec.out_spec
        if spec.num_leaves != len(outputs):
            raise BackendError(f"case {case.case_id}: OpenVINO returned {len(outputs)} outputs for the "
                               f"{spec.num_leaves} of the exported program")
        info["device_impl"] = f"openvino {openvino.__version__.split('-')[0]} CPU {precision}"
        with torch.no_grad():
            return Execution(_pytree.tree_unflatten(outputs, spec), executed_as="fused", info=info)

    def _compile(self, program: "torch.export.ExportedProgram", args: tuple, case: Case) -> Any:
        """``program`` converted by OpenVINO, fixed to the inputs' shapes, compiled for the CPU
        in the mode's configuration."""
        import openvino

        try:
            model = openvino.convert_model(program, extension=self.extensions or None)
        except Exception as exc:
            raise export_failure(case, "openvino.convert_model failed", exc) from exc
        if len(model.inputs) != len(args):
            raise BackendError(f"case {case.case_id}: the converted model takes {len(model.inputs)} inputs, "
                               f"the case passes {len(args)}")
        try:
            model.reshape({i: openvino.PartialShape(list(a.shape)) for i, a in enumerate(args)})
            return openvino.Core().compile_model(model, "CPU", CONFIGS[case.mode])
        except Exception as exc:
            raise export_failure(case, "OpenVINO cannot compile the converted model", exc) from exc


def _to_openvino(tensor: "torch.Tensor") -> "openvino.Tensor":
    import openvino
    import torch

    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, typed by OpenVINO
        return openvino.Tensor(tensor.contiguous().view(torch.int16).numpy(), list(tensor.shape), openvino.Type.bf16)
    return openvino.Tensor(tensor.contiguous().numpy())  # not numpy.ascontiguousarray: it makes a 0-d array 1-d


def _from_openvino(tensor: "openvino.Tensor") -> "torch.Tensor":
    import openvino
    import torch

    values = torch.from_numpy(tensor.data.copy())  # a bf16 tensor's data: its bits, typed float16
    return values.view(torch.bfloat16) if tensor.element_type == openvino.Type.bf16 else values


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(OpenVinoBackend())


__all__ = ["OpenVinoBackend"]
