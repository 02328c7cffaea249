"""Plugin: ONNX Runtime on the CPU as target ``ort:cpu`` (extra ``mluverify[ort]``).

A third-party-style back end through the public plugin API: each case's callable is exported
with ``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``: it needs no onnxscript)
and run by an onnxruntime ``InferenceSession`` on the ``CPUExecutionProvider`` with its default
graph optimizations (constant folding, node fusions). A compiler that is not PyTorch's, judged
by the ``cnml`` policy like the other compiled targets. Unavailable, with the reason, when
onnx or onnxruntime is not installed; importing this plugin imports neither.

A module is exported from a copy in the case's precision whose parameters require no grad (they
become constants of the graph), as every target takes an ordinary ``nn.Module``. bfloat16 cases
are refused (skipped with the reason), and so are a quantization (it quantizes nothing) and
``grad=True`` (an exported graph has no backward).

ONNX flattens outputs into a list; they are put back into the structure an eager CPU run of
the same callable returns. bfloat16 outputs cross as float32 (exactly), since onnxruntime's
Python API has no bfloat16 arrays. An export the exporter cannot make (an op without an ONNX form)
errors the case with the exporter's message, a graph onnxruntime cannot run (no kernel for an
op in that dtype) with onnxruntime's.
"""
from __future__ import annotations

import importlib.util
import io
from typing import Any, Callable

from mluverify.core.backends import Backend, BackendRegistry, Execution, move_module
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import BackendError

POLICY = "cnml"
OPSET = 17
REQUIRED = ("onnx", "onnxruntime")
BFLOAT16_REFUSAL = ("ort:cpu does not compute in bfloat16: onnxruntime's Python API takes no bfloat16 arrays and "
                    "its CPU execution provider has no bfloat16 kernel for most ops (Gemm, Conv, Relu, Max, ...); "
                    "run bfloat16 cases on cpu:inductor or a cuda target")


class OrtBackend(Backend):
    """``ort:cpu``: the case exported to ONNX and run by onnxruntime on the CPU."""

    name = "ort"
    modes = {"cpu": POLICY}
    no_backward = "it runs an exported inference graph, and ONNX export records no backward"

    def unavailable_reason(self) -> str | None:
        missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
        if missing:
            return f"{' and '.join(missing)} not installed (pip install 'mluverify[ort]')"
        return None

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        return super().refusal(fn, case, grad=grad) or (BFLOAT16_REFUSAL if case.dtype == "bfloat16" else None)

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import onnxruntime
        import torch
        from torch.utils import _pytree

        from mluverify.plugins._bound_call import BoundCall

        if isinstance(fn, torch.nn.Module):  # a copy in the case's precision, its weights constants of the graph
            fn = move_module(fn, "cpu", getattr(torch, case.dtype)).requires_grad_(False)

        def widened(*inputs: Any) -> Any:  # onnxruntime's Python API has no bfloat16 arrays
            return _pytree.tree_map(lambda t: t.float() if t.dtype == torch.bfloat16 else t, fn(*inputs, **kwargs))

        module = BoundCall(widened, {}).eval()
        with torch.no_grad():
            eager = _pytree.tree_flatten(fn(*(a.clone() for a in args), **kwargs))
            names = [f"input{i}" for i in range(len(args))]
            model = io.BytesIO()
            try:
                torch.onnx.export(module, tuple(a.clone() for a in args), model, dynamo=False,
                                  opset_version=OPSET, input_names=names)
            except Exception as exc:
                raise _failure(case, "torch.onnx.export failed", exc) from exc
        try:
            session = onnxruntime.InferenceSession(model.getvalue(), providers=["CPUExecutionProvider"])
            wanted = {i.name for i in session.get_inputs()}  # inputs the graph does not read are pruned
            results = session.run(None, {name: a.numpy() for name, a in zip(names, args) if name in wanted})
        except Exception as exc:
            raise _failure(case, "onnxruntime cannot run the exported graph", exc) from exc
        # the bfloat16 outputs (of the eager run) were widened for the trip: narrowed back, exactly
        outputs = [torch.from_numpy(value).to(torch.bfloat16) if like.dtype == torch.bfloat16 else torch.from_numpy(value)
                   for value, like in zip(results, eager[0])]
        return Execution(_pytree.tree_unflatten(outputs, eager[1]), executed_as="fused",
                         info={"device_impl": f"onnxruntime {onnxruntime.__version__}"})


def _failure(case: Case, what: str, exc: BaseException) -> BackendError:
    """The case's error: what failed and the first line of why."""
    return BackendError(f"case {case.case_id}: {what}: {type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0][:300]}")


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(OrtBackend())


__all__ = ["OrtBackend"]
