"""Plugin: ONNX Runtime on the CPU as target ``ort:cpu`` (extra ``mluverify[ort]``).

A third-party-style back end through the public plugin API: each case's callable is exported
with ``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``: it needs no onnxscript)
and run by an onnxruntime ``InferenceSession`` on the ``CPUExecutionProvider`` with its default
graph optimizations (constant folding, node fusions). A compiler that is not PyTorch's, judged
by the ``cnml`` policy like the other compiled targets. Unavailable, with the reason, when
onnx or onnxruntime is not installed; importing this plugin imports neither.

ONNX flattens outputs into a list; they are put back into the structure an eager CPU run of
the same callable returns. bfloat16 outputs cross as float32 (exactly), since onnxruntime's
Python API has no bfloat16 arrays. An export the exporter cannot make (an op without an ONNX form)
errors the case with the exporter's message.
"""
from __future__ import annotations

import importlib.util
import io
from typing import Any, Callable

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import BackendError

POLICY = "cnml"
OPSET = 17
REQUIRED = ("onnx", "onnxruntime")


class OrtBackend(Backend):
    """``ort:cpu``: the case exported to ONNX and run by onnxruntime on the CPU."""

    name = "ort"
    modes = {"cpu": POLICY}

    def unavailable_reason(self) -> str | None:
        missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
        if missing:
            return f"{' and '.join(missing)} not installed (pip install 'mluverify[ort]')"
        return None

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import onnxruntime
        import torch
        from torch.utils import _pytree

        from mluverify.plugins._bound_call import BoundCall

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
                raise BackendError(f"case {case.case_id}: torch.onnx.export failed: "
                                   f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}") from exc
        session = onnxruntime.InferenceSession(model.getvalue(), providers=["CPUExecutionProvider"])
        wanted = {i.name for i in session.get_inputs()}  # inputs the graph does not read are pruned
        feeds = {name: a.numpy() for name, a in zip(names, args) if name in wanted}
        # the bfloat16 outputs (of the eager run) were widened for the trip: narrowed back, exactly
        outputs = [torch.from_numpy(value).to(torch.bfloat16) if like.dtype == torch.bfloat16 else torch.from_numpy(value)
                   for value, like in zip(session.run(None, feeds), eager[0])]
        return Execution(_pytree.tree_unflatten(outputs, eager[1]), executed_as="fused",
                         info={"device_impl": f"onnxruntime {onnxruntime.__version__}"})


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(OrtBackend())


__all__ = ["OrtBackend"]
