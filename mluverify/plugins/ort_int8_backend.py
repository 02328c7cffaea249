"""Plugin: ONNX Runtime's own int8 quantizer as target ``ort:int8`` (extra ``mluverify[ort]``).

The seeds' quantized flow on a real int8 runtime: a case's float callable is exported to ONNX
(``torch.onnx.export``, as ``ort:cpu`` does), quantized by
``onnxruntime.quantization.quantize_static`` calibrated on the case's inputs (or on the
``calibration`` batches of ``ort_quantization``), saved as an int8 ONNX file (the offline
model), loaded back into a fresh ``InferenceSession`` and run by onnxruntime's int8 kernels on
the CPU. Only a case that asks for it (``quant="int8"``) runs there, judged by the ``cnml``
policy like every quantized case. The back end ``ort`` this plugin adds (last, ``trylast``) runs
its float modes (``ort:cpu``, ``ort:dynamo``) by the ``OrtBackend`` already registered, which
still refuse ``quant=`` (they quantize nothing), now naming ``ort:int8`` as the mode that does.

How to quantize (scheme, granularity, format, layers kept in float, calibration batches) is an
``OrtQuantization``, set around the cases with ``ort_quantization(...)`` (a context variable);
the default is the runtime's: QDQ, int8 activations and weights (s8s8), per tensor. Each record's
``device_impl`` says which quantizer, scheme and granularity ran. ``layer_errors`` is the
per-layer view (every quantized layer's own output error), read from extra graph outputs of
the quantized model.
"""
from __future__ import annotations

import contextlib
import contextvars
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from mluverify.core.backends import Backend, BackendRegistry, Execution
from mluverify.core.case import Case, Target
from mluverify.core.hookspecs import hookimpl
from mluverify.errors import InvalidArgument, Unsupported, valid_choice
from mluverify.plugins._exported import export_failure, exportable, timed
from mluverify.plugins.ort_backend import OPSET, POLICY, OrtBackend

if TYPE_CHECKING:
    import onnx
    import pandas

# scheme -> (activation type, weight type), onnxruntime.quantization.QuantType names
SCHEMES = {"s8s8": ("QInt8", "QInt8"), "u8s8": ("QUInt8", "QInt8")}
GRANULARITIES = ("per-tensor", "per-channel")
FORMATS = ("QDQ", "QOperator")
# The ops whose weights quantize_static quantizes: a user's layer maps to one of them.
WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
# Ops between a layer and its quantized output (QDQ quantizes a Conv + Relu pair after the Relu).
FOLLOWING_ACTIVATIONS = ("Relu", "Clip")
QUANT = "int8"
# The quantizer renames a graph output it quantizes: the layer now writes <name>_QuantizeLinear_Input.
QUANT_INPUT_SUFFIX = "_QuantizeLinear_Input"


@dataclass(frozen=True)
class OrtQuantization:
    """How ``ort:int8`` quantizes: ``scheme`` (activations/weights: ``"s8s8"``, ``"u8s8"``),
    ``granularity`` of the weight scales (``"per-tensor"``, ``"per-channel"``), ``format``
    (``"QDQ"``: QuantizeLinear / DequantizeLinear pairs that onnxruntime fuses into int8 kernels;
    ``"QOperator"``: QLinearConv, QLinearMatMul, ...), ``exclude``: layers kept in float, by module
    name (``"layer1.0.conv1"``) or ONNX node name (``"/fn/layer1/layer1.0/conv1/Conv"``),
    ``calibration``: the batches to calibrate on (each a tensor or a tuple of positional
    arguments; empty: the case's own inputs)."""

    scheme: str = "s8s8"
    granularity: str = "per-tensor"
    format: str = "QDQ"
    exclude: tuple[str, ...] = ()
    calibration: tuple[Any, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for what, value, valid in (("scheme", self.scheme, tuple(SCHEMES)),
                                   ("granularity", self.granularity, GRANULARITIES),
                                   ("format", self.format, FORMATS)):
            if value not in valid:
                raise valid_choice(f"ort:int8 quantization {what}", value, valid)
        if isinstance(self.exclude, str):
            raise InvalidArgument(f"ort:int8 quantization exclude={self.exclude!r} (type=str): give a tuple of "
                                  f"layer names, e.g. exclude=({self.exclude!r},)")

    def describe(self) -> str:
        """The record's words for it: quantizer, format, scheme, granularity, float layers."""
        kept = f", {len(self.exclude)} layer(s) in float" if self.exclude else ""
        return f"quantize_static {self.format} {self.scheme} {self.granularity}{kept}"


_QUANTIZATION: contextvars.ContextVar[OrtQuantization] = contextvars.ContextVar(
    "ort_int8_quantization", default=OrtQuantization())


@contextlib.contextmanager
def ort_quantization(quantization: OrtQuantization | None = None, **options: Any) -> Iterator[OrtQuantization]:
    """Quantize the ``ort:int8`` cases run inside the block as ``quantization`` (or
    ``OrtQuantization(**options)``): ``with ort_quantization(granularity="per-channel"): verify(...)``."""
    chosen = quantization if quantization is not None else OrtQuantization(**options)
    token = _QUANTIZATION.set(chosen)
    try:
        yield chosen
    finally:
        _QUANTIZATION.reset(token)


class OrtInt8Backend(Backend):
    """``ort``: the float modes of an ``OrtBackend`` (``float_backend``, which runs them: a
    plugin's own ``OrtBackend(translations=...)`` keeps its lowerings) and ``ort:int8``, the case
    quantized by onnxruntime's own quantizer, saved, loaded back and run in int8."""

    name = OrtBackend.name
    quantizing_modes = (QUANT,)
    no_backward = OrtBackend.no_backward

    def __init__(self, float_backend: OrtBackend | None = None) -> None:
        self.float_backend = float_backend or OrtBackend()
        self.modes = {**self.float_backend.modes, QUANT: POLICY}
        self.compiling_modes = (*self.float_backend.compiling_modes, QUANT)

    def unavailable_reason(self) -> str | None:
        return self.float_backend.unavailable_reason()

    def mode_unavailable_reason(self, mode: str) -> str | None:
        return None if mode == QUANT else self.float_backend.mode_unavailable_reason(mode)

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        if case.mode != QUANT:  # the common refusals first: they name ort:int8 as the mode that quantizes
            return super().refusal(fn, case, grad=grad) or self.float_backend.refusal(fn, case, grad=grad)
        if grad:
            return f"{case.target} does not run backward: {self.no_backward}"
        if case.quant != QUANT:
            return (f"{case.target} runs int8 models only: ask for quant='int8' (the case asks for "
                    f"{case.quant or 'no quantization'!r}); run float cases on ort:cpu")
        if case.dtype != "float32":
            return f"{case.target} quantizes a float32 model: the case's dtype is {case.dtype!r}"
        return None

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        if case.mode != QUANT:
            return self.float_backend.execute(fn, args, kwargs, case=case)
        import onnxruntime
        from torch.utils import _pytree

        quantization, info = _QUANTIZATION.get(), {}
        eager = _pytree.tree_flatten(_called(fn, args, kwargs))
        with tempfile.TemporaryDirectory(prefix="ort-int8-") as directory:
            with timed(info):  # export, calibration and quantization: the compile
                path = save_int8(fn, args, Path(directory) / "case.int8.onnx", kwargs=kwargs,
                                 quantization=quantization, case=case)
            outputs = run_saved(path, args, case=case)
        info["device_impl"] = (f"onnxruntime {onnxruntime.__version__} int8: {quantization.describe()}, "
                               f"calibrated on {len(quantization.calibration) or 1} batch(es)")
        return Execution(_pytree.tree_unflatten(outputs, eager[1]), executed_as="fused", info=info)


def save_int8(fn: Callable, args: tuple, path: str | Path, *, kwargs: dict | None = None,
              quantization: OrtQuantization | None = None, case: Case | None = None) -> Path:
    """The offline model: ``fn(*args, **kwargs)`` exported to ONNX, quantized by
    ``quantize_static`` as ``quantization`` says (default: the context's, see
    ``ort_quantization``), calibrated on its batches or on ``args``, written to ``path``."""
    from onnxruntime.quantization import quantize_static

    quantization = quantization or _QUANTIZATION.get()
    case = case or Case("save_int8", _name_of(fn), _TARGET, quant=QUANT)
    path = Path(path)
    float_path = path.with_name(path.name + ".float.onnx")
    excluded = node_names(prepared_float(fn, args, kwargs or {}, float_path, case), quantization.exclude)
    try:
        quantize_static(str(float_path), str(path), _Batches(_feeds(quantization.calibration or (args,))),
                        **_quantizer_options(quantization), nodes_to_exclude=list(excluded))
    except Exception as exc:
        raise export_failure(case, "onnxruntime's quantize_static failed", exc) from exc
    finally:
        float_path.unlink(missing_ok=True)
    if not quantized_layers(path):
        path.unlink()
        raise Unsupported(f"case {case.case_id}: {case.target} quantizes the weighted layers of an ONNX graph "
                          f"({', '.join(WEIGHTED_OPS)}); {_name_of(fn)} has none left to quantize, so "
                          f"quant='int8' would quantize nothing")
    return path


def run_saved(path: str | Path, args: tuple, *, case: Case | None = None) -> list:
    """Load a saved (int8) ONNX model into a fresh session on the CPU and run it on ``args``;
    its outputs as CPU tensors, in the graph's order."""
    import onnxruntime
    import torch

    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        results = session.run(None, _feeds([args])[0])
    except Exception as exc:
        raise export_failure(case or Case(str(path), "run_saved", _TARGET, quant=QUANT),
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
        quant_pre_process(str(path), str(path))
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
        raise valid_choice("ort:int8 layer to keep in float (exclude)", unknown[0],
                           sorted(by_module) or ["(the model has no weighted layer)"])
    return tuple(by_module.get(name, name) for name in names)


def weighted_layers(graph: "onnx.ModelProto") -> dict[str, str]:
    """ONNX node name -> the module name it was exported from (``"layer1.0.conv1"``), for every
    node of ``WEIGHTED_OPS`` (its node name where it came from no submodule)."""
    return {node.name: module_name(node.name) for node in graph.graph.node if node.op_type in WEIGHTED_OPS}


def module_name(node: str) -> str:
    """The module an exported node came from, read from its scope (the TorchScript exporter
    names ``layer1.0.conv1``'s Conv ``/fn/layer1/layer1.0/conv1/Conv``: one scope per module,
    each its qualified name from the last non-numeric part on); the node name when it has none."""
    parts: list[str] = []
    for scope in node.strip("/").split("/")[:-1]:  # the op's name last
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
    import numpy as np
    import onnx
    import pandas as pd
    import torch

    from mluverify.device.quantization._layer_errors import COLUMNS
    from mluverify.judge import metrics

    quantization = quantization or _QUANTIZATION.get()
    if quantization.format != "QDQ":
        raise InvalidArgument(f"layer_errors reads each layer's dequantized output, which only the QDQ format "
                              f"has (format={quantization.format!r} keeps it inside its QLinear ops): use format='QDQ'")
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    case = Case("layer_errors", _name_of(model), _TARGET, quant=QUANT)
    with tempfile.TemporaryDirectory(prefix="ort-int8-layers-") as directory:
        float_path, int8_path = Path(directory) / "float.onnx", Path(directory) / "int8.onnx"
        float_graph = prepared_float(model, args, {}, float_path, case)
        save_int8(model, args, int8_path, quantization=quantization, case=case)
        int8_graph = onnx.load(str(int8_path))
        layers = _layer_outputs(float_graph, int8_graph, quantized_layers(int8_path))
        expected = _run_with_outputs(float_graph, [float_out for float_out, _ in layers.values()], args)
        actual = _run_with_outputs(int8_graph, [int8_out for _, int8_out in layers.values()], args)
    ops = {node.name: node.op_type for node in float_graph.graph.node}
    rows = []
    for (node, (float_out, int8_out)) in layers.items():
        got, want = torch.from_numpy(actual[int8_out]), torch.from_numpy(expected[float_out])
        scores = metrics(got, want)
        rows.append({"layer": module_name(node), "type": ops[node], "shape": tuple(np.shape(got)),
                     "dtype": str(got.dtype).replace("torch.", ""),
                     **{key: scores[key] for key in ("rel_mse", "sqnr_db", "cosine")}})
    return pd.DataFrame(rows, columns=list(COLUMNS))


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
    return dict(zip(wanted, session.run(wanted, _feeds([args])[0])))


class _Batches:
    """The calibration batches as onnxruntime's ``CalibrationDataReader`` (``get_next``)."""

    def __init__(self, feeds: list[dict]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict | None:
        return next(self._feeds, None)


def _feeds(batches: Sequence[Any]) -> list[dict]:
    """Each batch (a tensor or a tuple of positional arguments) as the session's input dict."""
    feeds = []
    for batch in batches:
        args = batch if isinstance(batch, (tuple, list)) else (batch,)
        feeds.append({name: a.detach().float().numpy() for name, a in zip(_input_names(len(args)), args)})
    return feeds


def _quantizer_options(quantization: OrtQuantization) -> dict[str, Any]:
    from onnxruntime.quantization import QuantFormat, QuantType

    activations, weights = SCHEMES[quantization.scheme]
    return {"quant_format": QuantFormat[quantization.format], "per_channel": quantization.granularity == "per-channel",
            "activation_type": QuantType[activations], "weight_type": QuantType[weights]}


def _input_names(count: int) -> list[str]:
    return [f"input{i}" for i in range(count)]


def _called(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """The eager CPU output, whose structure the flat ONNX outputs are put back into."""
    import torch

    with torch.no_grad():
        return fn(*(a.clone() for a in args), **kwargs)


def _name_of(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


_TARGET = Target("ort", QUANT)  # what the records of the functions outside a run name


@hookimpl(trylast=True)  # after the plugins that add an "ort": it runs their float modes
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registered = registry.get(OrtBackend.name) if OrtBackend.name in registry else None
    registry.add(OrtInt8Backend(registered if isinstance(registered, OrtBackend) else None))


__all__ = ["OrtInt8Backend", "OrtQuantization", "export_float", "layer_errors", "module_name", "node_names",
           "ort_quantization", "prepared_float", "quantized_layers", "run_saved", "save_int8", "weighted_layers"]
