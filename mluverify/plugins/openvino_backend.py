"""Plugin: OpenVINO's CPU plugin as targets ``openvino:cpu`` and ``openvino:default`` (extra
``mluverify[openvino]``), and ``openvino:int8`` (extra ``mluverify[openvino-int8]``).

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

``openvino:int8`` runs only the cases that ask for ``quant="int8"``: converted as for
``openvino:cpu``, quantized by NNCF, saved as OpenVINO IR, read back and run by the CPU plugin's
int8 kernels (the executor is ``mluverify/plugins/openvino_int8_backend.py``).

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
from mluverify.plugins._exported import export_failure, export_program, exportable, timed
from mluverify.plugins._int8 import INT8, int8_refusal
from mluverify.plugins._openvino_program import CONFIGS, converted, run_compiled, structured

if TYPE_CHECKING:
    import openvino
    import torch

POLICY = "cnml"
INSTALL = "pip install 'mluverify[openvino]'"
INT8_INSTALL = "pip install 'mluverify[openvino-int8]'"


class OpenVinoBackend(Backend):
    """``openvino:cpu`` (float32 inference precision) and ``openvino:default`` (the CPU
    plugin's default precision): the case exported, converted and compiled by OpenVINO;
    ``openvino:int8``: converted, quantized by NNCF and run in int8 (float32 elsewhere).

    ``extensions``: OpenVINO front-end extensions for ``convert_model`` (conversion rules that
    replace the converter's own for an op).
    """

    name = "openvino"
    modes = {mode: POLICY for mode in (*CONFIGS, INT8)}
    quantizing_modes = (INT8,)
    calibrating_modes = (INT8,)
    compiling_modes = tuple(modes)  # an export, a conversion and a compile per case
    opaque_modes = tuple(CONFIGS)  # the CPU plugin's compiled program (int8: its layers' outputs are dumped)
    no_backward = "it runs a converted inference graph, which has no backward"

    def __init__(self, extensions: Sequence[Any] = ()) -> None:
        self.extensions = list(extensions)

    def unavailable_reason(self) -> str | None:
        return None if importlib.util.find_spec("openvino") else f"openvino not installed ({INSTALL})"

    def mode_unavailable_reason(self, mode: str) -> str | None:
        return f"nncf not installed ({INT8_INSTALL})" if mode == INT8 and not importlib.util.find_spec("nncf") else None

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        if case.mode == INT8:
            return int8_refusal(case, self.no_backward, grad=grad)
        return super().refusal(fn, case, grad=grad)

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        if case.mode == INT8:
            from mluverify.plugins.openvino_int8_backend import execute_int8

            return execute_int8(self.extensions, fn, args, kwargs, case=case)
        import openvino

        info: dict[str, Any] = {}
        with timed(info):
            program = export_program(exportable(fn, kwargs, case), args, case)
            compiled = self._compile(program, args, case)
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        outputs = run_compiled(compiled, args, case, program.graph_signature.user_inputs)
        info["device_impl"] = f"openvino {openvino.__version__.split('-')[0]} CPU {precision}"
        return Execution(structured(outputs, program, case), executed_as="fused", info=info)

    def _compile(self, program: "torch.export.ExportedProgram", args: tuple, case: Case) -> Any:
        """``program`` converted by OpenVINO, fixed to the inputs' shapes, compiled for the CPU
        in the mode's configuration."""
        import openvino

        model = self.converted(program, args, case)
        try:
            return openvino.Core().compile_model(model, "CPU", CONFIGS[case.mode])
        except Exception as exc:
            raise export_failure(case, "OpenVINO cannot compile the converted model", exc) from exc

    def converted(self, program: "torch.export.ExportedProgram", args: tuple, case: Case) -> "openvino.Model":
        """``program`` converted by OpenVINO with this back end's extensions (``converted``)."""
        return converted(program, args, case, self.extensions)


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(OpenVinoBackend())


__all__ = ["OpenVinoBackend"]
