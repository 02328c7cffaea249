"""Plugin: ONNX Runtime on the CPU as targets ``ort:cpu``, ``ort:int8`` (extra ``mluverify[ort]``)
and ``ort:dynamo`` (extra ``mluverify[ort-dynamo]``).

A third-party-style back end through the public plugin API: each case's callable is exported to
ONNX and run by an onnxruntime ``InferenceSession`` on the ``CPUExecutionProvider`` with its
default graph optimizations (constant folding, node fusions). The two modes differ in the
exporter, so in how each op is lowered to ONNX:

- ``ort:cpu``: ``torch.onnx.export(..., dynamo=False)``, the TorchScript exporter (opset
  ``OPSET``; it needs no onnxscript);
- ``ort:dynamo``: ``torch.onnx.export(..., dynamo=True)``, the exporter that captures the program
  with ``torch.export`` and lowers each aten op with onnxscript's functions (opset
  ``DYNAMO_OPSET``). A plugin replaces how an op is lowered with ``OrtBackend(translations=...)``
  (the exporter's ``custom_translation_table``).

``ort:int8`` runs only the cases that ask for ``quant="int8"``: exported as for ``ort:cpu``,
quantized by onnxruntime's own quantizer, saved, loaded back and run by its int8 kernels (the
executor is ``mluverify/plugins/ort_int8_backend.py``).

A compiler that is not PyTorch's, judged by the ``cnml`` policy like the other compiled targets.
Unavailable, with the install line, when onnx or onnxruntime is not installed (``ort:dynamo``
also when onnxscript is not); importing this plugin imports none of them.

A module is exported from a copy in the case's precision whose parameters require no grad (they
become constants of the graph), as every target takes an ordinary ``nn.Module``. bfloat16 cases
are refused (skipped with the reason), and so are a quantization (it quantizes nothing) and
``grad=True`` (an exported graph has no backward).

ONNX flattens outputs into a list; they are put back into the structure an eager CPU run of
the same callable returns. bfloat16 outputs cross as float32 (exactly), since onnxruntime's
Python API has no bfloat16 arrays. An export the exporter cannot make (an op without an ONNX form)
errors the case with the exporter's message, a graph onnxruntime cannot run (no kernel for an
op in that dtype) with onnxruntime's. ``compile_s``: the export and the session's creation
(onnxruntime's graph optimizations), kept out of the case's ``duration_s``.
"""
from __future__ import annotations

import importlib.util
import io
from typing import TYPE_CHECKING, Any, Callable, Mapping

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.plugins._exported import DYNAMO_OPSET, OPSET, export_failure, exportable, timed
from mluverify.plugins._int8 import INT8, int8_refusal

if TYPE_CHECKING:
    from torch import nn

POLICY = "cnml"
REQUIRED = ("onnx", "onnxruntime")
DYNAMO_REQUIRED = ("onnxscript",)
BFLOAT16_WHY = ("onnxruntime's Python API takes no bfloat16 arrays and its CPU execution provider has no bfloat16 "
                "kernel for most ops (Gemm, Conv, Relu, Max, ...); run bfloat16 cases on cpu:inductor or a cuda target")
BFLOAT16_REFUSAL = f"ort:cpu does not compute in bfloat16: {BFLOAT16_WHY}"
# The case's error: what failed and the first line of why (kept under this name for the plugins
# that import it).
_failure = export_failure


def missing(modules: tuple[str, ...], extra: str) -> str | None:
    """Which of ``modules`` are not installed, with the line that installs ``extra``; None: all are."""
    absent = [name for name in modules if not _installed(name)]
    return f"{' and '.join(absent)} not installed (pip install 'mluverify[{extra}]')" if absent else None


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported; a dotted name's parent is looked up first
    (``find_spec("iree.runtime")`` raises where ``iree`` is missing)."""
    parts = module.split(".")
    return all(importlib.util.find_spec(".".join(parts[:depth])) is not None for depth in range(1, len(parts) + 1))


class OrtBackend(Backend):
    """``ort:cpu`` and ``ort:dynamo``: the case exported to ONNX (by the TorchScript or the
    dynamo exporter) and run by onnxruntime on the CPU; ``ort:int8``: exported as for
    ``ort:cpu``, quantized by onnxruntime's quantizer and run in int8.

    ``translations``: for ``ort:dynamo``, aten ops (``torch.ops.aten.relu.default``) mapped to
    the onnxscript functions that lower them instead of the exporter's own.
    """

    name = "ort"
    modes = {"cpu": POLICY, "dynamo": POLICY, INT8: POLICY}
    quantizing_modes = (INT8,)
    calibrating_modes = (INT8,)
    compiling_modes = tuple(modes)  # an export and a session per case
    opaque_modes = ("cpu", "dynamo")  # onnxruntime's kernels (int8: its layers' outputs are dumped)
    no_backward = "it runs an exported inference graph, and ONNX export records no backward"

    def __init__(self, translations: Mapping[Callable, Callable] | None = None) -> None:
        self.translations = dict(translations or {})

    def unavailable_reason(self) -> str | None:
        return missing(REQUIRED, "ort")

    def mode_unavailable_reason(self, mode: str) -> str | None:
        return missing(DYNAMO_REQUIRED, "ort-dynamo") if mode == "dynamo" else None

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        if case.mode == INT8:
            return int8_refusal(case, self.no_backward, grad=grad)
        return super().refusal(fn, case, grad=grad) or (
            f"{case.target} does not compute in bfloat16: {BFLOAT16_WHY}" if case.dtype == "bfloat16" else None)

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        if case.mode == INT8:
            from mluverify.plugins.ort_int8_backend import execute_int8

            return execute_int8(fn, args, kwargs, case=case)
        import onnxruntime
        import torch
        from torch.utils import _pytree

        from mluverify.plugins._bound_call import BoundCall

        module = exportable(fn, kwargs, case)

        def widened(*inputs: Any) -> Any:  # onnxruntime's Python API has no bfloat16 arrays
            return _pytree.tree_map(lambda t: t.float() if t.dtype == torch.bfloat16 else t, module(*inputs))

        info: dict[str, Any] = {}
        names = [f"input{i}" for i in range(len(args))]
        with torch.no_grad():
            eager = _pytree.tree_flatten(_outputs_like(module, args))
            with timed(info):
                model = self._export(BoundCall(widened, {}).eval(), tuple(a.clone() for a in args), names, case)
                session = _session(model, case)
        try:
            wanted = {i.name for i in session.get_inputs()}  # inputs the graph does not read are pruned
            results = session.run(None, {name: a.numpy() for name, a in zip(names, args) if name in wanted})
        except Exception as exc:
            raise _failure(case, "onnxruntime cannot run the exported graph", exc) from exc
        # the bfloat16 outputs (of the eager run) were widened for the trip: narrowed back, exactly
        outputs = [torch.from_numpy(value).to(torch.bfloat16) if like.dtype == torch.bfloat16 else torch.from_numpy(value)
                   for value, like in zip(results, eager[0])]
        info["device_impl"] = self._device_impl(case.mode, onnxruntime.__version__)
        return Execution(_pytree.tree_unflatten(outputs, eager[1]), executed_as="fused", info=info)

    def _export(self, module: "nn.Module", args: tuple, names: list[str], case: Case) -> bytes:
        """The ONNX model of ``module`` called with ``args``, by the mode's exporter."""
        import torch

        try:
            if case.mode == "dynamo":
                program = torch.onnx.export(module, args, dynamo=True, opset_version=DYNAMO_OPSET, input_names=names,
                                            custom_translation_table=self.translations or None, verbose=False)
                return program.model_proto.SerializeToString()
            model = io.BytesIO()
            torch.onnx.export(module, args, model, dynamo=False, opset_version=OPSET, input_names=names)
            return model.getvalue()
        except Exception as exc:
            raise _failure(case, "torch.onnx.export failed", exc) from exc

    @staticmethod
    def _device_impl(mode: str, version: str) -> str:
        if mode != "dynamo":
            return f"onnxruntime {version}"
        import onnxscript

        return f"onnxruntime {version}, dynamo exporter (onnxscript {onnxscript.__version__}, opset {DYNAMO_OPSET})"


def _session(model: bytes, case: Case) -> Any:
    """An onnxruntime session of ``model`` on the CPU (its graph optimizations run here)."""
    import onnxruntime

    try:
        return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise _failure(case, "onnxruntime cannot run the exported graph", exc) from exc


def _outputs_like(module: Any, args: tuple) -> Any:
    """``module``'s outputs as fake tensors: their structure and dtypes, all the trip back from
    onnxruntime needs, without running torch's CPU kernels, which lack some float16 ops the
    exported graph does not need them for (``avg_pool3d``); run eagerly where the fake run fails
    (an output whose size depends on the data)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return module(*args)
    except Exception:  # noqa: BLE001  any failure of the fake run: the eager run tells the same
        return module(*(a.clone() for a in args))


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(OrtBackend())


__all__ = ["OrtBackend"]
