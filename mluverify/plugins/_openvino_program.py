"""What the OpenVINO modes share (``openvino:cpu`` / ``:default`` in ``openvino_backend``,
``openvino:int8`` in ``openvino_int8_backend``): the CPU plugin's configurations, converting an
exported program, and running a compiled model on torch tensors. Imports openvino only inside
its functions."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from mluverify.core.case import Case
from mluverify.errors import BackendError
from mluverify.plugins._exported import export_failure

if TYPE_CHECKING:
    import openvino
    import torch

# mode -> the CPU plugin's configuration; "default" leaves the inference precision to the plugin
CONFIGS: dict[str, dict[str, str]] = {"cpu": {"INFERENCE_PRECISION_HINT": "f32"}, "default": {}}


def converted(program: "torch.export.ExportedProgram", args: tuple, case: Case,
          extensions: Sequence[Any] = ()) -> "openvino.Model":
    """``program`` converted by OpenVINO (with OpenVINO front-end ``extensions``), its inputs fixed
    to the shapes of ``args``."""
    import openvino

    try:
        model = openvino.convert_model(program, extension=list(extensions) or None)
    except Exception as exc:
        raise export_failure(case, "openvino.convert_model failed", exc) from exc
    names = program.graph_signature.user_inputs
    unknown = [port.get_any_name() for port in model.inputs if not port.get_names() & set(names)]
    if unknown or len(names) != len(args):
        raise BackendError(f"case {case.case_id}: the converted model takes {len(model.inputs)} inputs "
                           f"{sorted(p.get_any_name() for p in model.inputs)}, the case passes {len(args)}")
    try:
        model.reshape({name: openvino.PartialShape(list(arg.shape))
                       for name, arg in by_input_name(model.inputs, names, args).items()})
    except Exception as exc:
        raise export_failure(case, "OpenVINO cannot fix the converted model's input shapes", exc) from exc
    return model


def run_compiled(compiled: Any, args: tuple, case: Case, names: Sequence[str] | None = None) -> list["torch.Tensor"]:
    """The outputs of ``compiled`` (an OpenVINO ``CompiledModel``) run on ``args``, as CPU tensors.

    :param names: the exported program's input names, one per arg: the converted model names its
        inputs so and drops those the program never reads (a program of its input's shape alone),
        so each arg is fed by name; positionally without them, which needs one input per arg.
    """
    if names is None and len(compiled.inputs) != len(args):
        raise BackendError(f"case {case.case_id}: the compiled model takes {len(compiled.inputs)} inputs "
                           f"{sorted(p.get_any_name() for p in compiled.inputs)}, the case passes {len(args)}: "
                           "name the exported program's inputs (names=...) to feed the ones it kept")
    try:
        request = compiled.create_infer_request()
        request.infer([_to_openvino(a) for a in args] if names is None
                      else {name: _to_openvino(a) for name, a in by_input_name(compiled.inputs, names, args).items()})
        return [_from_openvino(request.get_tensor(output)) for output in compiled.outputs]
    except Exception as exc:
        raise export_failure(case, "OpenVINO cannot run the compiled program", exc) from exc


def by_input_name(ports: Sequence[Any], names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    """``values`` (one per exported-program input of ``names``) keyed by the names of ``ports``, a
    converted or compiled model's inputs: those of the program's inputs the model kept. A port's
    tensor may carry other names beside the program's (``{'12', 'a_0', 'constant_pad_nd:0'}`` for
    an input the first op pads), and ``get_any_name`` may give one of those, so the program's
    name is looked up among all of them."""
    named = dict(zip(names, values))
    return {port.get_any_name(): named[next(name for name in port.get_names() if name in named)] for port in ports}


def structured(outputs: list["torch.Tensor"], program: "torch.export.ExportedProgram", case: Case) -> Any:
    """OpenVINO's flat ``outputs`` in the structure ``program`` returns."""
    import torch
    from torch.utils import _pytree

    spec = program.call_spec.out_spec
    if spec.num_leaves != len(outputs):
        raise BackendError(f"case {case.case_id}: OpenVINO returned {len(outputs)} outputs for the "
                           f"{spec.num_leaves} of the exported program")
    with torch.no_grad():
        return _pytree.tree_unflatten(outputs, spec)


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
