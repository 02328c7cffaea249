"""ONNX Runtime's own int8 quantizer: the executor of target ``ort:int8`` (a mode of the ``ort``
back end, ``mluverify/plugins/ort_backend.py``; extra ``mluverify[ort]``).

The seeds' quantized flow on a real int8 runtime: a case's float callable is exported to ONNX
(``torch.onnx.export``, as ``ort:cpu`` does), quantized by
``onnxruntime.quantization.quantize_static`` calibrated on the case's inputs (or on a
calibration set: ``verify(..., calibration=...)`` or ``ort_quantization(calibration=...)``),
saved as an int8 ONNX file (the offline model), loaded back into a fresh ``InferenceSession`` and
run by onnxruntime's int8 kernels on the CPU. Only a case that asks for it (``quant="int8"``)
runs there, judged by the ``cnml`` policy like every quantized case.

How to quantize (scheme, granularity, format, layers kept in float, calibration batches) is an
``OrtQuantization``, set around the cases with ``ort_quantization(...)`` (a context variable);
the default is the runtime's: QDQ, int8 activations and weights (s8s8), per tensor. Each record's
``device_impl`` says which quantizer, scheme and granularity ran. ``layer_errors`` is the
per-layer view (every quantized layer's own output error), read from extra graph outputs of
the quantized model. Not a plugin: importing it imports neither onnx nor onnxruntime.
"""
from __future__ import annotations

import contextvars
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from mluverify.core.backends import Execution
from mluverify.core.case import Case, Target
from mluverify.errors import InvalidArgument, Unsupported
from mluverify.plugins._exported import OPSET, export_failure, exportable, timed
from mluverify.plugins._int8 import (
    GRANULARITIES, INT8, Int8Quantization, calibration_batches, has_vnni, layer_error_table, layer_groups,
    model_inputs, name_of, quantizing_as, seven_bit_note, unknown_layer, unseen_by_torch_modes)

if TYPE_CHECKING:
    import onnx
    import pandas
    import torch

# scheme -> (activation type, weight type), onnxruntime.quantization.QuantType names
SCHEMES = {"s8s8": ("QInt8", "QInt8"), "u8s8": ("QUInt8", "QInt8")}
FORMATS = ("QDQ", "QOperator")
# The ops whose weights quantize_static quantizes: a user's layer maps to one of them.
WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
# Ops between a layer and its quantized output (QDQ quantizes a Conv + Relu pair after the Relu).
FOLLOWING_ACTIVATIONS = ("Relu", "Clip")
# The quantizer renames a graph output it quantizes: the layer now writes <name>_QuantizeLinear_Input.
QUANT_INPUT_SUFFIX = "_QuantizeLinear_Input"


@dataclass(frozen=True, kw_only=True)
class OrtQuantization(Int8Quantization):
    """How ``ort:int8`` quantizes: ``scheme`` (activations/weights: ``"s8s8"``, ``"u8s8"``),
    ``format`` (``"QDQ"``: QuantizeLinear / DequantizeLinear pairs that onnxruntime fuses into int8
    kernels; ``"QOperator"``: QLinearConv, QLinearMatMul, ...), and the common options of
    ``Int8Quantization`` (``granularity``, default per tensor; ``exclude`` by module name or ONNX
    node name such as ``"/fn/layer1/layer1.0/conv1/Conv"``; ``calibration``)."""

    target: ClassVar[str] = "ort:int8"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {
        "scheme": tuple(SCHEMES), "granularity": GRANULARITIES, "format": FORMATS}

    scheme: str = "s8s8"
    format: str = "QDQ"

    def describe(self) -> str:
        """The record's words for it: quantizer, format, scheme, granularity, float layers."""
        return f"quantize_static {self.format} {self.scheme} {self.granularity}{self.kept_in_float()}"


_QUANTIZATION: contextvars.ContextVar[OrtQuantization] = contextvars.ContextVar(
    "ort_int8_quantization", default=OrtQuantization())


def ort_quantization(quantization: OrtQuantization | None = None, **options: Any) -> AbstractContextManager[OrtQuantization]:
    """Quantize the ``ort:int8`` cases run inside the block as ``quantization`` (or
    ``OrtQuantization(**options)``): ``with ort_quantization(granularity="per-channel"): verify(...)``."""
    return quantizing_as(_QUANTIZATION, quantization or OrtQuantization(**options))


def execute_int8(fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
    """Run ``case`` on ``ort:int8``: quantize ``fn`` as the context's ``OrtQuantization`` says,
    save the int8 model, load it into a fresh session and run it on ``args``. In the QDQ format
    each quantized layer's output is a fusion group of the run (``layer_groups``)."""
    import onnxruntime
    from torch.utils import _pytree

    quantization, info = _QUANTIZATION.get(), {}
    eager = _pytree.tree_flatten(_called(fn, args, kwargs))
    with unseen_by_torch_modes(), tempfile.TemporaryDirectory(prefix="ort-int8-") as directory:
        with timed(info):  # export, calibration and quantization: the compile
            path, calibrated, float_graph = _saved_int8(fn, args, Path(directory) / "case.int8.onnx", kwargs or {},
                                                        quantization, case)
        outputs = run_saved(path, args, case=case)
        # QOperator keeps each layer's output inside its QLinear op: no layer to read
        layers = layer_groups(_layer_pairs(float_graph, path, args)) if quantization.format == "QDQ" else ()
    info["device_impl"] = (f"onnxruntime {onnxruntime.__version__} int8: {quantization.describe()}, {calibrated}"
                           f"{seven_bit_note(has_vnni())}")
    return Execution(_pytree.tree_unflatten(outputs, eager[1]), executed_as="fused", info=info, groups=layers)


def save_int8(fn: Callable, args: tuple, path: str | Path, *, kwargs: dict | None = None,
              quantization: OrtQuantization | None = None, case: Case | None = None) -> Path:
    """The offline model: ``fn(*args, **kwargs)`` exported to ONNX, quantized by
    ``quantize_static`` as ``quantization`` says (default: the context's, see
    ``ort_quantization``), calibrated on the case's ``calibration=`` set, else its batches, else
    ``args``, written to ``path``."""
    case = case or Case("save_int8", name_of(fn), _TARGET, quant=INT8)
    return _saved_int8(fn, args, Path(path), kwargs or {}, quantization or _QUANTIZATION.get(), case)[0]


def _saved_int8(fn: Callable, args: tuple, path: Path, kwargs: dict, quantization: OrtQuantization,
                case: Case) -> tuple[Path, str, "onnx.ModelProto"]:
    """``save_int8``'s model at ``path``, the record's words for what it was calibrated on, and
    the float model it quantized."""
    from onnxruntime.quantization import quantize_static

    batches, calibrated = calibration_batches(quantization, args)
    float_path = path.with_name(path.name + ".float.onnx")
    float_graph = prepared_float(fn, args, kwargs, float_path, case)
    excluded = node_names(float_graph, quantization.exclude)
    try:
        quantize_static(str(float_path), str(path), calibration_reader(batches, float_graph),
                        **_quantizer_options(quantization), nodes_to_exclude=list(excluded))
    except Exception as exc:
        raise export_failure(case, "onnxruntime's quantize_static failed", exc) from exc
    finally:
        float_path.unlink(missing_ok=True)
    if not quantized_layers(path):
        path.unlink()
        raise Unsupported(f"case {case.case_id}: {case.target} quantizes the weighted layers of an ONNX graph "
                          f"({', '.join(WEIGHTED_OPS)}); {name_of(fn)} has none left to quantize, so "
                          f"quant='int8' would quantize nothing")
    return path, calibrated, float_graph


def run_saved(path: str | Path, args: tuple, *, case: Case | None = None) -> list:
    """Load a saved (int8) ONNX model into a fresh session on the CPU and run it on ``args``;
    its outputs as CPU tensors, in the graph's order."""
    import onnxruntime
    import torch

    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        results = session.run(None, session_feeds(session, [args])[0])
    except Exception as exc:
        raise export_failure(case or Case(str(path), "run_saved", _TARGET, quant=INT8),
                       "onnxruntime cannot run the int8 model", exc) from exc
    return [torch.from_numpy(value) for value in results]


def prepared_float(fn: Callable, args: tuple, kwargs: dict, path: Path, case: Case) -> "onnx.ModelProto":
    """The float model the quantizer takes, at ``path``: ``export_float``'s, prepared by the
    runtime's own ``quant_pre_process`` (shapes inferred, constants folded: the exporter feeds
    some weights through Identity nodes, which the QOperator quantizer cannot read)."""
    import onnx
    from onnxruntime.quantization import quant_pre_process

    export_float(fn, args, kwargs, path, case)
    try:
        # Where its symbolic shape inference is incomplete, onnxruntime saves the model it got
        # (sym_shape_infer_temp.onnx and its weights) into the working directory: keep it in ours
        # (by hand: contextlib.chdir is Python 3.11's).
        working = os.getcwd()
        os.chdir(path.parent)
        try:
            quant_pre_process(str(path.resolve()), str(path.resolve()))
        finally:
            os.chdir(working)
    except Exception as exc:
        raise export_failure(case, "onnxruntime's quant_pre_process failed", exc) from exc
    return onnx.load(str(path))


def export_float(fn: Callable, args: tuple, kwargs: dict, path: Path, case: Case) -> None:
    """``fn`` bound to ``kwargs`` (a float32 copy of a module, its weights constants of the graph)
    exported to ONNX at ``path`` with inputs ``input0``, ``input1``, ... (the TorchScript exporter,
    as ``ort:cpu``). A callable the exporter cannot export is ``case``'s error with the exporter's
    message."""
    import torch

    module = exportable(fn, kwargs, case).eval()
    try:
        with torch.no_grad():
            torch.onnx.export(module, tuple(a.clone() for a in args), str(path), dynamo=False,
                              opset_version=OPSET, input_names=_input_names(len(args)))
    except Exception as exc:
        raise export_failure(case, "torch.onnx.export failed", exc) from exc


def node_names(graph: "onnx.ModelProto", names: Sequence[str]) -> tuple[str, ...]:
    """The ONNX node names of ``names`` (each a module name or a node name of a weighted
    layer); a name that is neither is an InvalidArgument listing the layers."""
    layers = weighted_layers(graph)
    by_module = {module: node for node, module in layers.items()}
    unknown = [name for name in names if name not in layers and name not in by_module]
    if unknown:
        raise unknown_layer(OrtQuantization.target, unknown[0], by_module)
    return tuple(by_module.get(name, name) for name in names)


def weighted_layers(graph: "onnx.ModelProto") -> dict[str, str]:
    """ONNX node name -> the module name it was exported from (``"layer1.0.conv1"``), for every
    node of ``WEIGHTED_OPS`` (its node name where it came from no submodule)."""
    return {node.name: module_name(node.name) for node in graph.graph.node if node.op_type in WEIGHTED_OPS}


def module_name(node: str) -> str:
    """The module an exported node came from, read from its scope (the TorchScript exporter
    names ``layer1.0.conv1``'s Conv ``/fn/layer1/layer1.0/conv1/Conv``: one scope per module,
    each its qualified name from the last non-numeric part on); the node name when it has none.
    A node ``quant_pre_process`` fused keeps the first one's name with the fusion's after it
    (``/fn/head/MatMul/MatMulAddFusion``: a Linear of a 3-D input, MatMul and Add as one Gemm)."""
    names = node.strip("/").split("/")
    parts: list[str] = []
    for scope in names[:-2 if names[-1].endswith("Fusion") else -1]:  # the op's name last
        atoms = scope.split(".")
        numbered = len(atoms) > 1 and atoms[-1].isnumeric() and parts and parts[-1] == atoms[-2]
        parts.append(atoms[-1] if numbered else scope)
    return ".".join(parts[1:]) or node  # without the BoundCall's "fn"


def quantized_layers(path: str | Path) -> list[str]:
    """The weighted layers of a saved model that run in int8: a QDQ node whose weight is
    dequantized from int8, or a QOperator node (``QLinearConv``, ``MatMulInteger``, ...)."""
    import onnx

    graph = onnx.load(str(path)).graph
    dequantized = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    return [n.name for n in graph.node
            if (n.op_type in WEIGHTED_OPS and len(n.input) > 1 and n.input[1] in dequantized)
            or n.op_type.startswith("QLinear") and n.op_type[len("QLinear"):] in WEIGHTED_OPS
            or n.op_type in ("ConvInteger", "MatMulInteger")]


def layer_errors(model: Callable, inputs: Any, quantization: OrtQuantization | None = None) -> "pandas.DataFrame":
    """One row per quantized layer of ``model`` on ``ort:int8``, in graph order, with the columns
    of the emulator's ``mluverify.device.quantization.layer_errors``: the layer's own quantized
    output (dequantized, read as an extra graph output of the int8 model) against the float
    model's (an extra output of the float ONNX graph), both run by onnxruntime on ``inputs``.
    ``type`` is the ONNX op. Only the QDQ format exposes a layer's output."""
    quantization = quantization or _QUANTIZATION.get()
    if quantization.format != "QDQ":
        raise InvalidArgument(f"layer_errors reads each layer's dequantized output, which only the QDQ format "
                              f"has (format={quantization.format!r} keeps it inside its QLinear ops): use format='QDQ'")
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    case = Case("layer_errors", name_of(model), _TARGET, quant=INT8)
    with tempfile.TemporaryDirectory(prefix="ort-int8-layers-") as directory:
        float_path, int8_path = Path(directory) / "float.onnx", Path(directory) / "int8.onnx"
        float_graph = prepared_float(model, args, {}, float_path, case)
        save_int8(model, args, int8_path, quantization=quantization, case=case)
        return layer_error_table(_layer_pairs(float_graph, int8_path, args))


def _layer_pairs(float_graph: "onnx.ModelProto", int8_path: Path,
                 args: tuple) -> list[tuple[str, str, "torch.Tensor", "torch.Tensor"]]:
    """``(module name, ONNX op, int8 output, float output)`` of each quantized layer of the QDQ
    model at ``int8_path``, in graph order: its dequantized output and the float graph's same
    value, each an extra graph output of its model run by onnxruntime on ``args``."""
    import onnx
    import torch

    int8_graph = onnx.load(str(int8_path))
    layers = _layer_outputs(float_graph, int8_graph, quantized_layers(int8_path))
    expected = _run_with_outputs(float_graph, [float_out for float_out, _ in layers.values()], args)
    actual = _run_with_outputs(int8_graph, [int8_out for _, int8_out in layers.values()], args)
    ops = {node.name: node.op_type for node in float_graph.graph.node}
    return [(module_name(node), ops[node], torch.from_numpy(actual[int8_out]), torch.from_numpy(expected[float_out]))
            for node, (float_out, int8_out) in layers.items()]


def _layer_outputs(float_graph: "onnx.ModelProto", int8_graph: "onnx.ModelProto",
                   quantized: list[str]) -> dict[str, tuple[str, str]]:
    """Quantized node -> (its output in the float graph, the dequantized value the int8 graph
    hands on): the node's output or, for a Conv + Relu that QDQ quantizes as one, the Relu's."""
    consumers: dict[str, list] = {}
    for node in float_graph.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    int8_nodes = {node.name: node for node in int8_graph.graph.node}
    dequantized = {node.input[0]: node.output[0] for node in int8_graph.graph.node if node.op_type == "QuantizeLinear"}
    pairs = {}
    for name in quantized:
        output = int8_nodes[name].output[0]
        following = consumers.get(output, [])
        if output not in dequantized and len(following) == 1 and following[0].op_type in FOLLOWING_ACTIVATIONS:
            output = following[0].output[0]
        q_output = dequantized.get(output)
        dq = next((n.output[0] for n in int8_graph.graph.node
                   if n.op_type == "DequantizeLinear" and q_output in n.input[:1]), output)
        # a graph output keeps its name on the dequantized value; the layer's is renamed
        pairs[name] = (output.removesuffix(QUANT_INPUT_SUFFIX), dq)
    return pairs


def _run_with_outputs(graph: "onnx.ModelProto", names: list[str], args: tuple) -> dict[str, Any]:
    """Run ``graph`` with ``names`` added as graph outputs (the runtime's intermediate values)."""
    import onnx
    import onnxruntime

    extended = onnx.ModelProto()
    extended.CopyFrom(graph)
    present = {output.name for output in extended.graph.output}
    extended.graph.output.extend(onnx.ValueInfoProto(name=name) for name in dict.fromkeys(names) if name not in present)
    session = onnxruntime.InferenceSession(extended.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [output.name for output in session.get_outputs()]
    return dict(zip(wanted, session.run(wanted, session_feeds(session, [args])[0])))


class _Batches:
    """The calibration batches as onnxruntime's ``CalibrationDataReader`` (``get_next``)."""

    def __init__(self, feeds: list[dict]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict | None:
        return next(self._feeds, None)


def calibration_reader(batches: Sequence[Any], graph: "onnx.ModelProto") -> _Batches:
    """``batches`` as the ``CalibrationDataReader`` of the float model ``graph``, fed by its inputs' names."""
    return _Batches(_feeds(batches, [i.name for i in graph.graph.input]))


def session_feeds(session: "onnxruntime.InferenceSession", batches: Sequence[Any]) -> list[dict]:
    """``batches`` as input dicts of ``session``'s model, by its inputs' names."""
    return _feeds(batches, [i.name for i in session.get_inputs()])


def _feeds(batches: Sequence[Any], graph_inputs: Sequence[str]) -> list[dict]:
    """Each batch (a tensor or a tuple of positional arguments) as the input dict of a model whose
    inputs are ``graph_inputs``: the exporter prunes an input the graph never reads (one taken for
    its shape alone), and onnxruntime refuses a feed the model does not name."""
    arrays = [model_inputs(batch) for batch in batches]
    return [{name: value for name, value in zip(_input_names(len(inputs)), inputs) if name in graph_inputs}
            for inputs in arrays]


def _quantizer_options(quantization: OrtQuantization) -> dict[str, Any]:
    from onnxruntime.quantization import QuantFormat, QuantType

    activations, weights = SCHEMES[quantization.scheme]
    return {"quant_format": QuantFormat[quantization.format], "per_channel": quantization.granularity == "per-channel",
            "activation_type": QuantType[activations], "weight_type": QuantType[weights], "reduce_range": not has_vnni()}


def _input_names(count: int) -> list[str]:
    return [f"input{i}" for i in range(count)]


def _called(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """The eager CPU output, whose structure the flat ONNX outputs are put back into."""
    import torch

    with torch.no_grad():
        return fn(*(a.clone() for a in args), **kwargs)


_TARGET = Target("ort", INT8)  # what the records of the functions outside a run name


__all__ = ["OrtQuantization", "calibration_reader", "execute_int8", "export_float", "layer_errors", "module_name",
           "node_names", "ort_quantization", "prepared_float", "quantized_layers", "run_saved", "save_int8",
           "session_feeds", "weighted_layers"]
