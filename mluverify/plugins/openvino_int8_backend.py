"""NNCF and OpenVINO's int8 kernels: the executor of target ``openvino:int8`` (a mode of the
``openvino`` back end, ``mluverify/plugins/openvino_backend.py``; extra ``mluverify[openvino-int8]``).

The seeds' quantized flow on a second real int8 runtime: a case's float callable is captured by
``torch.export`` and converted by ``openvino.convert_model`` (as ``openvino:cpu`` does), quantized
by ``nncf.quantize`` calibrated on the case's inputs (or on a calibration set:
``verify(..., calibration=...)`` or ``openvino_quantization(calibration=...)``), saved as OpenVINO
IR (``openvino.save_model``, weights kept float32: the offline model), read back, compiled for the
CPU plugin with ``INFERENCE_PRECISION_HINT`` f32 (the layers NNCF left in float compute in
float32) and run. Only a case that asks for it (``quant="int8"``) runs there, judged by the
``cnml`` policy like every quantized case.

How to quantize (NNCF's preset, granularity, layers kept in float, calibration batches) is an
``OpenVinoQuantization``, set around the cases with ``openvino_quantization(...)``; the default is
NNCF's: the ``performance`` preset (symmetric activations and weights), weights per channel. Each
record's ``device_impl`` says the quantizer (with NNCF's version), preset, granularity and how many
layers the CPU plugin really ran in int8 (read from its runtime model). ``layer_errors`` is the
per-layer view, read from named node outputs of the int8 and the float model. Not a plugin:
importing it imports neither openvino nor nncf.
"""
from __future__ import annotations

import contextvars
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from mluverify.core.backends import Execution
from mluverify.core.case import Case, Target
from mluverify.errors import BackendError, Unsupported
from mluverify.plugins._exported import export_failure, export_program, exportable, timed
from mluverify.plugins._int8 import (
    GRANULARITIES, INT8, Int8Quantization, calibration_batches, has_vnni, layer_error_table, layer_groups,
    model_inputs, name_of, quantizing_as, seven_bit_note, unknown_layer, unseen_by_torch_modes)
from mluverify.plugins._openvino_program import CONFIGS, by_input_name, converted, run_compiled, structured

if TYPE_CHECKING:
    import openvino
    import pandas
    import torch

# preset -> nncf.QuantizationPreset member: symmetric activations and weights, or asymmetric
# activations (a zero point) with symmetric weights
PRESETS = {"performance": "PERFORMANCE", "mixed": "MIXED"}
# The ops whose weights NNCF quantizes: a user's layer maps to one of them.
WEIGHTED_OPS = ("Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData", "MatMul")
# Nodes between a weight constant and its layer (a grouped conv's reshape, NNCF's quantizer).
WEIGHT_PATH_OPS = ("Reshape", "Convert", "FakeQuantize", "Subtract", "Multiply")
INT8_PRECISIONS = ("i8", "u8")  # a layer's runtimePrecision in the CPU plugin's runtime model when it ran in int8
FLOAT32 = CONFIGS["cpu"]  # INFERENCE_PRECISION_HINT f32: what NNCF left float runs in float32


@dataclass(frozen=True, kw_only=True)
class OpenVinoQuantization(Int8Quantization):
    """How ``openvino:int8`` quantizes: NNCF's ``preset`` (``"performance"``: symmetric activations
    and weights; ``"mixed"``: asymmetric activations), and the common options of
    ``Int8Quantization`` (``granularity``, default per channel as NNCF's; ``exclude`` by module
    name or OpenVINO node name such as ``"convolution/aten.convolution.default/Convolution"``,
    NNCF's ``IgnoredScope(names=...)``; ``calibration``)."""

    target: ClassVar[str] = "openvino:int8"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"preset": tuple(PRESETS), "granularity": GRANULARITIES}

    preset: str = "performance"
    granularity: str = "per-channel"

    def describe(self) -> str:
        """The record's words for it: quantizer, preset, granularity, float layers."""
        return f"nncf.quantize {self.preset} {self.granularity}{self.kept_in_float()}"


_QUANTIZATION: contextvars.ContextVar[OpenVinoQuantization] = contextvars.ContextVar(
    "openvino_int8_quantization", default=OpenVinoQuantization())


def openvino_quantization(quantization: OpenVinoQuantization | None = None,
                          **options: Any) -> AbstractContextManager[OpenVinoQuantization]:
    """Quantize the ``openvino:int8`` cases run inside the block as ``quantization`` (or
    ``OpenVinoQuantization(**options)``): ``with openvino_quantization(preset="mixed"): verify(...)``."""
    return quantizing_as(_QUANTIZATION, quantization or OpenVinoQuantization(**options))


@dataclass(frozen=True)
class QuantizedModel:
    """A callable quantized by NNCF: ``model`` (int8) and ``float_model`` (both ``openvino.Model``),
    the exported ``program`` (its output structure), ``layers``: weighted node -> module name,
    ``calibrated``: the record's words for the calibration set."""

    model: Any
    float_model: Any
    program: Any
    layers: dict[str, str]
    calibrated: str

    @property
    def input_names(self) -> list[str]:
        """The exported program's input names, one per argument: the models are fed by them, as
        they keep only the inputs the program reads."""
        return list(self.program.graph_signature.user_inputs)


def execute_int8(extensions: Sequence[Any], fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
    """Run ``case`` on ``openvino:int8``: quantize ``fn`` as the context's
    ``OpenVinoQuantization`` says (converted with OpenVINO front-end ``extensions``), save the IR,
    read it back, compile it for the CPU and run it on ``args``. Each quantized layer's output is a
    fusion group of the run (``layer_groups``)."""
    import nncf
    import openvino

    quantization, info = _QUANTIZATION.get(), {}
    with unseen_by_torch_modes(), tempfile.TemporaryDirectory(prefix="openvino-int8-") as directory:
        with timed(info):  # export, conversion, calibration, quantization and compile
            quantized = quantize(fn, args, kwargs=kwargs, quantization=quantization, case=case, extensions=extensions)
            compiled = compile_saved(save_model(quantized.model, Path(directory) / "case.int8.xml", case), case)
        outputs = run_compiled(compiled, args, case, quantized.input_names)
        layers = layer_groups(_layer_pairs(quantized, args, case))
    ran = int8_layers(compiled)
    if not ran:
        raise BackendError(f"case {case.case_id}: NNCF quantized {name_of(fn)}, but the CPU plugin ran no layer in int8")
    info["device_impl"] = (f"openvino {openvino.__version__.split('-')[0]} CPU int8: nncf {nncf.__version__} "
                           f"{quantization.describe()}, {quantized.calibrated}; {len(ran)} layer(s) ran in int8"
                           f"{seven_bit_note(has_vnni())}")
    return Execution(structured(outputs, quantized.program, case), executed_as="fused", info=info, groups=layers)


def quantize(fn: Callable, args: tuple, *, kwargs: dict | None = None, quantization: OpenVinoQuantization | None = None,
             case: Case | None = None, extensions: Sequence[Any] = ()) -> QuantizedModel:
    """``fn(*args, **kwargs)`` exported, converted (with ``extensions``) and quantized by
    ``nncf.quantize`` as ``quantization`` says (default: the context's), calibrated on the case's
    ``calibration=`` set, else its batches, else ``args``. A model with no weighted layer left to
    quantize is ``Unsupported``."""
    import nncf
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix, QuantizationParameters

    quantization = quantization or _QUANTIZATION.get()
    case = case or Case("quantize", name_of(fn), _TARGET, quant=INT8)
    batches, calibrated = calibration_batches(quantization, args)
    program = export_program(exportable(fn, kwargs or {}, case), args, case).run_decompositions()
    float_model = converted(program, args, case, extensions)
    layers = weighted_layers(float_model, program)
    ignored = nncf.IgnoredScope(names=list(node_names(layers, quantization.exclude)))
    try:
        model = nncf.quantize(
            float_model, nncf.Dataset([by_input_name(float_model.inputs, program.graph_signature.user_inputs,
                                                     model_inputs(batch)) for batch in batches]),
            subset_size=len(batches),
            preset=nncf.QuantizationPreset[PRESETS[quantization.preset]], ignored_scope=ignored,
            advanced_parameters=AdvancedQuantizationParameters(
                weights_quantization_params=QuantizationParameters(per_channel=quantization.granularity == "per-channel"),
                overflow_fix=OverflowFix.FIRST_LAYER if has_vnni() else OverflowFix.ENABLE))  # FIRST_LAYER: NNCF's default
    except Exception as exc:
        raise export_failure(case, "nncf.quantize failed", exc) from exc
    if not quantized_layers(model):
        raise Unsupported(f"case {case.case_id}: {case.target} quantizes the weighted layers of an OpenVINO model "
                          f"({', '.join(WEIGHTED_OPS)}); {name_of(fn)} has none left to quantize, so quant='int8' "
                          f"would quantize nothing")
    return QuantizedModel(model, float_model, program, layers, calibrated)


def save_int8(fn: Callable, args: tuple, path: str | Path, *, kwargs: dict | None = None,
              quantization: OpenVinoQuantization | None = None) -> Path:
    """The offline model: ``quantize``'s int8 model saved as OpenVINO IR at ``path`` (``.xml``,
    its weights in the ``.bin`` beside it)."""
    return save_model(quantize(fn, args, kwargs=kwargs, quantization=quantization).model, Path(path))


def save_model(model: "openvino.Model", path: Path, case: Case | None = None) -> Path:
    """``model`` saved as IR at ``path``, its float weights kept float32 (``save_model``
    compresses them to float16 by default, which would change the float layers' results)."""
    import openvino

    try:
        openvino.save_model(model, str(path), compress_to_fp16=False)
    except Exception as exc:
        raise export_failure(case or Case(str(path), "save_model", _TARGET, quant=INT8),
                             "openvino.save_model failed", exc) from exc
    return path


def compile_saved(path: str | Path, case: Case | None = None) -> Any:
    """The IR at ``path`` read by a fresh ``openvino.Core`` and compiled for the CPU, float layers in float32."""
    import openvino

    try:
        return openvino.Core().compile_model(str(path), "CPU", FLOAT32)
    except Exception as exc:
        raise export_failure(case or Case(str(path), "compile_saved", _TARGET, quant=INT8),
                             "OpenVINO cannot compile the int8 model", exc) from exc


def run_saved(path: str | Path, args: tuple, *, names: Sequence[str] | None = None) -> list["torch.Tensor"]:
    """Read a saved (int8) IR, compile it for the CPU and run it on ``args``: its outputs as CPU
    tensors, in the model's order. ``names``: the exported program's input names, one per arg
    (``QuantizedModel.input_names``), needed where the model dropped an input its program never
    reads; without them ``args`` are fed positionally."""
    case = Case(str(path), "run_saved", _TARGET, quant=INT8)
    return run_compiled(compile_saved(path, case), args, case, names)


def int8_layers(compiled: Any) -> list[str]:
    """The layers the CPU plugin runs in int8: those of ``compiled``'s runtime model (after its
    fusions) whose runtime precision is i8 / u8, constants and reorders aside."""
    return [op.get_friendly_name() for op in compiled.get_runtime_model().get_ordered_ops()
            if op.get_rt_info()["runtimePrecision"].astype(str) in INT8_PRECISIONS
            and op.get_rt_info()["layerType"].astype(str) not in ("Const", "Reorder", "Subgraph")]


def weighted_layers(model: "openvino.Model", program: Any) -> dict[str, str]:
    """OpenVINO node name -> the module it came from (``"layer1.0.conv1"``), for every node of
    ``WEIGHTED_OPS`` whose weight is a constant. OpenVINO names a node after the exported
    program's node (``convolution_1/aten.convolution.default/Convolution``), whose module stack
    names the module; a node from no submodule keeps its own name."""
    modules = {node.name: _module_of(node) for node in program.graph.nodes}
    return {op.get_friendly_name(): modules.get(_program_node(op)) or op.get_friendly_name()
            for op in model.get_ordered_ops() if op.get_type_name() in WEIGHTED_OPS and _weight_is_constant(op)}


def node_names(layers: dict[str, str], names: Sequence[str]) -> tuple[str, ...]:
    """The OpenVINO node names of ``names`` (module names, each all of its weighted nodes, or
    node names); a name that is neither is an InvalidArgument listing the modules."""
    unknown = [name for name in names if name not in layers and name not in layers.values()]
    if unknown:
        raise unknown_layer(OpenVinoQuantization.target, unknown[0], set(layers.values()))
    return tuple(node for node, module in layers.items() if node in names or module in names)


def quantized_layers(model: "openvino.Model") -> list[str]:
    """The weighted nodes of an NNCF-quantized model that are quantized: a FakeQuantize on their
    input or their weight."""
    return [op.get_friendly_name() for op in model.get_ordered_ops()
            if op.get_type_name() in WEIGHTED_OPS and any(_through(port.get_source_output().get_node(), "FakeQuantize")
                                                          for port in op.inputs())]


def layer_errors(model: Callable, inputs: Any, quantization: OpenVinoQuantization | None = None) -> "pandas.DataFrame":
    """One row per quantized layer of ``model`` on ``openvino:int8``, in graph order, with the
    columns of the emulator's ``mluverify.device.quantization.layer_errors``: the layer's own output
    (the last node the layer's exported op became, e.g. the bias Add after a Convolution) in the
    int8 model against the same node of the float model, each added as an output of its model
    and run by the CPU plugin on ``inputs``. ``type`` is the OpenVINO op of the weighted node."""
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    case = Case("layer_errors", name_of(model), _TARGET, quant=INT8)
    return layer_error_table(_layer_pairs(quantize(model, args, quantization=quantization, case=case), args, case))


def _layer_pairs(quantized: QuantizedModel, args: tuple,
                 case: Case) -> list[tuple[str, str, "torch.Tensor", "torch.Tensor"]]:
    """``(module name, OpenVINO op, int8 output, float output)`` of each quantized layer, in
    graph order: the layer's own output node in the int8 and the float model, each added as an
    output of its model and run by the CPU plugin on ``args``."""
    types = {op.get_friendly_name(): op.get_type_name() for op in quantized.float_model.get_ordered_ops()}
    outputs = {node: _layer_output(quantized.float_model, node) for node in quantized_layers(quantized.model)}
    nodes, names = list(outputs.values()), quantized.input_names
    actual = _run_with_outputs(quantized.model, nodes, args, names, case)
    expected = _run_with_outputs(quantized.float_model, nodes, args, names, case)
    # a MatMul of two activations (attention's scores) is quantized too but has no weight, so no module
    # in ``layers``: its node name names it
    return [(quantized.layers.get(node, node), types[node], actual[output], expected[output])
            for node, output in outputs.items()]


def _layer_output(float_model: "openvino.Model", node: str) -> str:
    """The layer's own output: the last node (in graph order) of the float model that came from
    the same exported op as ``node`` (e.g. the bias Add after a Convolution), else ``node``. Read in
    the float model, whose nodes the int8 one keeps by name: NNCF names the int8 weight constants
    it adds after the layer (``Multiply_12/fq_weights_1`` of a convolution the converter renamed
    when it folded a batch norm into it), and those are no layer's output."""
    prefix = node.split("/")[0] + "/"
    same_op = [op.get_friendly_name() for op in float_model.get_ordered_ops()
               if op.get_friendly_name().startswith(prefix) and op.get_type_name() != "Constant"]
    return (same_op or [node])[-1]


def _run_with_outputs(model: "openvino.Model", nodes: list[str], args: tuple, input_names: list[str],
                      case: Case) -> dict[str, "torch.Tensor"]:
    """The values of ``nodes`` when a copy of ``model`` with them added as outputs runs on
    ``args``, fed by the exported program's ``input_names``."""
    import openvino

    extended = model.clone()
    ops = {op.get_friendly_name(): op for op in extended.get_ordered_ops()}
    extended.add_outputs([ops[node].output(0) for node in nodes])  # a node already an output adds none
    values = run_compiled(openvino.Core().compile_model(extended, "CPU", FLOAT32), args, case, input_names)
    producers = [result.get_node().input(0).get_source_output().get_node().get_friendly_name()
                 for result in extended.outputs]
    return {node: value for node, value in zip(producers, values) if node in nodes}


def _module_of(node: Any) -> str:
    """The module an exported program's node came from, without the exported wrapper's ``fn``;
    "" for a node of the wrapped callable itself."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    return path.partition(".")[2]


def _program_node(op: Any) -> str:
    return op.get_friendly_name().split("/")[0]


def _weight_is_constant(op: Any) -> bool:
    return _through(op.input(1).get_source_output().get_node(), "Constant")


def _through(node: Any, wanted: str) -> bool:
    """Whether ``node`` is of type ``wanted`` or reaches one through ``WEIGHT_PATH_OPS`` (first inputs)."""
    while node.get_type_name() != wanted:
        if node.get_type_name() not in WEIGHT_PATH_OPS:
            return False
        node = node.input(0).get_source_output().get_node()
    return True


_TARGET = Target("openvino", INT8)  # what the records of the functions outside a run name


__all__ = ["OpenVinoQuantization", "QuantizedModel", "compile_saved", "execute_int8", "int8_layers", "layer_errors",
           "node_names", "openvino_quantization", "quantize", "quantized_layers", "run_saved", "save_int8",
           "save_model", "weighted_layers"]
