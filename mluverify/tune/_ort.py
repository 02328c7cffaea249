"""``ort:int8`` for the tuner: onnxruntime's own ``quantize_static`` with ``nodes_to_exclude``.

The float model is exported once (``prepared_float``: the exporter ``ort:int8`` uses, then
``quant_pre_process``), for one sample: the TorchScript exporter fixes every shape, so the
calibration batches and the judged batch run sample by sample (a model whose samples are the
first dimension of every input and output). Each trial quantizes that file with the layers kept
in float in ``nodes_to_exclude`` (QDQ, the scheme and granularity asked for), loads it into a
fresh session and runs it. The layers are the nodes the fully quantized graph feeds from a
``DequantizeLinear``, named as ORT names them (``/fn/layer1/layer1.0/conv1/Conv``).
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from mluverify.core.case import Case, Target
from mluverify.errors import InvalidArgument

if TYPE_CHECKING:
    import numpy
    import onnx
    import torch.nn as nn

ANSWER_FILE = "quantize_static.json"
SESSION_FILE = "session.json"
# onnxruntime's session optimizer quantizes the float weights of a node whose input comes from a
# DequantizeLinear (a node nodes_to_exclude kept in float, next to a quantized one) back to int8
# per tensor: nodes_to_exclude would not keep it in float. The tuned sessions turn it off.
DISABLED_OPTIMIZERS = ("WeightBiasQuantization",)
_QDQ = ("QuantizeLinear", "DequantizeLinear")
# quantize_static names a quantized initializer after the float one
QUANTIZED_SUFFIX = "_quantized"


class OrtInt8Runtime:
    """``model`` exported for onnxruntime, calibrated on ``calibration`` and judged on ``args``,
    quantized by ``quantize_static`` as ``options`` say (``scheme``, ``granularity``)."""

    target = "ort:int8"
    options = ("scheme", "granularity")
    keep_float_key = "nodes_to_exclude"

    def __init__(self, model: "nn.Module", calibration: Sequence[Any], args: tuple, options: Mapping[str, Any]) -> None:
        import onnx

        from mluverify.plugins._int8 import calibration_batches
        from mluverify.plugins.ort_int8_backend import OrtQuantization, prepared_float

        self.quantization = OrtQuantization(**options, calibration=tuple(calibration))
        batches, _ = calibration_batches(self.quantization, args)  # a per-channel scheme needs enough samples
        self.samples = split_samples(args)
        self.calibration = [sample for batch in batches for sample in split_samples(_as_args(batch))]
        self._folder = tempfile.TemporaryDirectory(prefix="mluverify-tune-ort-")
        self.float_path = Path(self._folder.name) / "float.onnx"
        case = Case("tune", type(model).__name__, Target("ort", "int8"), quant="int8")
        self.float_graph = prepared_float(model.eval(), self.samples[0], {}, self.float_path, case)
        self.int8_graph = onnx.load(str(self._quantize(())))
        self._layers = quantized_nodes(self.int8_graph)

    def layers(self) -> list[str]:
        return list(self._layers)

    def _quantize(self, keep_float: Sequence[str]) -> Path:
        from onnxruntime.quantization import quantize_static

        from mluverify.plugins.ort_int8_backend import _quantizer_options, calibration_reader

        path = Path(self._folder.name) / "int8.onnx"
        quantize_static(str(self.float_path), str(path), calibration_reader(self.calibration, self.float_graph),
                        **_quantizer_options(self.quantization), nodes_to_exclude=list(keep_float))
        return path

    def run(self, keep_float: Sequence[str]) -> Any:
        return run_samples(self._quantize(keep_float), self.samples)

    def scores(self) -> dict[str, float]:
        """Each layer's own error: the quantization noise of what the quantizer rounds for it,
        its weights, its activation inputs and its output, added in energy (``sqrt(sum(n**2))``),
        each the relative error (raw rel_mse) of a ``DequantizeLinear``'s output against the
        value before its ``QuantizeLinear`` in the same graph (a weight: against the float
        weight). Local, so a layer inherits nothing from the layers before it (an error that
        grows downstream would otherwise rank every later layer with it); from one run of the
        fully quantized graph with those values added as graph outputs."""
        from mluverify.plugins.ort_int8_backend import _layer_outputs

        rounded = _rounded_values(self.int8_graph, self.float_graph)
        wanted = [*rounded, *(pre for pre in rounded.values() if isinstance(pre, str))]
        values = _values(self.int8_graph, wanted, self.samples)
        # a weight's dequantized value comes back once per sample, joined along the first dimension
        noise = {post: _relative_error(values[post], values[pre]) if isinstance(pre, str)
                 else _relative_error(values[post].reshape(-1, *pre.shape)[0], pre)
                 for post, pre in rounded.items()}
        outputs = _layer_outputs(self.float_graph, self.int8_graph, self._layers)
        by_name = {node.name: node for node in self.int8_graph.graph.node}
        return {name: math.sqrt(sum(noise.get(value, 0.0) ** 2
                                    for value in {*by_name[name].input, outputs[name][1]}))
                for name in self._layers}

    def answer(self, keep_float: Sequence[str]) -> dict[str, Any]:
        """``quantize_static``'s keyword arguments (enum members by name), the session's
        ``disabled_optimizers`` and the calibration size."""
        from mluverify.plugins.ort_int8_backend import _quantizer_options

        arguments = {key: getattr(value, "name", value) for key, value in _quantizer_options(self.quantization).items()}
        kept = [node for node in self._layers if node in set(keep_float)]
        return {"quantize_static": {**arguments, "nodes_to_exclude": kept},
                "session": {"disabled_optimizers": list(DISABLED_OPTIMIZERS)},
                "calibration_samples": len(self.calibration)}

    @staticmethod
    def files(data: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, str]:
        from mluverify.tune._output import JUDGED

        answer = data["answer"]
        return {ANSWER_FILE: json.dumps(answer["quantize_static"], indent=2) + "\n",
                SESSION_FILE: json.dumps(answer["session"], indent=2) + "\n",
                "test_tuned.py": _TEST.format(**fields, task=data.get("task")) + JUDGED}


def split_samples(args: tuple) -> list[tuple]:
    """``args`` (each a tensor with the samples first) as one argument tuple per sample."""
    import torch

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if len(tensors) != len(args) or not tensors or tensors[0].dim() == 0:
        raise InvalidArgument(f"ort:int8 tuning runs a model sample by sample: every input must be a tensor with the "
                              f"samples first, got {', '.join(type(a).__name__ for a in args) or 'no input'}")
    return [tuple(a[i:i + 1] for a in args) for i in range(len(tensors[0]))]


def run_samples(path: str | Path, samples: Sequence[tuple]) -> Any:
    """The saved model at ``path`` run by a fresh onnxruntime session (``DISABLED_OPTIMIZERS``
    off) on each sample, the outputs joined along the first dimension (a tensor, or a tuple
    for several)."""
    import numpy as np
    import onnxruntime
    import torch

    from mluverify.plugins.ort_int8_backend import session_feeds

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"],
                                           disabled_optimizers=list(DISABLED_OPTIMIZERS))
    runs = [session.run(None, feed) for feed in session_feeds(session, samples)]
    joined = [torch.from_numpy(np.concatenate(values)) for values in zip(*runs)]
    return joined[0] if len(joined) == 1 else tuple(joined)


def exported_float(model: "nn.Module", sample: tuple, path: str | Path) -> Path:
    """``model`` exported for one sample and prepared for the quantizer, as the tuner did."""
    from mluverify.plugins.ort_int8_backend import prepared_float

    prepared_float(model.eval(), sample, {}, Path(path), Case("tuned", type(model).__name__, Target("ort", "int8"),
                                                               quant="int8"))
    return Path(path)


def quantized_nodes(graph: "onnx.ModelProto") -> list[str]:
    """The nodes the quantizer gave a dequantized input (weight or activation), in graph order,
    each name once (``quant_pre_process`` gives the reshapes it adds around a Gemm one name, and
    ``nodes_to_exclude`` then names them all)."""
    dequantized = {node.output[0] for node in graph.graph.node if node.op_type == "DequantizeLinear"}
    return list(dict.fromkeys(node.name for node in graph.graph.node
                              if node.op_type not in _QDQ and any(name in dequantized for name in node.input)))


def _rounded_values(graph: "onnx.ModelProto", float_graph: "onnx.ModelProto") -> dict[str, Any]:
    """Each ``DequantizeLinear`` output of ``graph`` -> what it rounds: the value before its
    ``QuantizeLinear`` (a name in ``graph``), or for a weight the float initializer (an array)."""
    from onnx import numpy_helper

    quantized_from = {node.output[0]: node.input[0] for node in graph.graph.node if node.op_type == "QuantizeLinear"}
    weights = {tensor.name: tensor for tensor in float_graph.graph.initializer}
    rounded: dict[str, Any] = {}
    for node in graph.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        source = node.input[0]
        weight = weights.get(source.removesuffix(QUANTIZED_SUFFIX))
        if source in quantized_from:
            rounded[node.output[0]] = quantized_from[source]
        elif weight is not None:
            rounded[node.output[0]] = numpy_helper.to_array(weight)
    return rounded


def _values(graph: "onnx.ModelProto", names: Sequence[str], samples: Sequence[tuple]) -> dict[str, "numpy.ndarray"]:
    """``names`` (values inside ``graph``) over every sample, each joined along the first dimension."""
    import numpy as np
    import onnx
    import onnxruntime

    from mluverify.plugins.ort_int8_backend import session_feeds

    extended = onnx.ModelProto()
    extended.CopyFrom(graph)
    present = {output.name for output in extended.graph.output}
    wanted = list(dict.fromkeys(names))
    extended.graph.output.extend(onnx.ValueInfoProto(name=name) for name in wanted if name not in present)
    session = onnxruntime.InferenceSession(extended.SerializeToString(), providers=["CPUExecutionProvider"],
                                           disabled_optimizers=list(DISABLED_OPTIMIZERS))
    runs = [session.run(wanted, feed) for feed in session_feeds(session, samples)]
    return {name: np.concatenate([np.atleast_1d(run[i]) for run in runs]) for i, name in enumerate(wanted)}


def _relative_error(actual: "numpy.ndarray", expected: "numpy.ndarray") -> float:
    """``sqrt(sum((a - e)**2) / sum(e**2))`` in float64 (0 for two all-zero values)."""
    import numpy as np

    difference = np.sum((actual.astype(np.float64) - expected.astype(np.float64)) ** 2)
    energy = np.sum(expected.astype(np.float64) ** 2)
    return float(math.sqrt(difference / energy)) if energy > 0 else float(difference > 0)


def _as_args(batch: Any) -> tuple:
    return batch if isinstance(batch, tuple) else (batch,)


_TEST = '''"""Generated by `mluverify tune --target ort:int8`: the tuned int8 model of {script_name} stays
within its bound.

Exports the float model as the tuner did, quantizes it with onnxruntime's own quantize_static
and the arguments in quantize_static.json (nodes_to_exclude: the nodes kept in float), runs it
in a fresh onnxruntime session made with session.json (disabled_optimizers: without it the
session quantizes an excluded node's weights again) and judges it against the float model on the CPU by the cnml
policy's rel_mse, or by the task gate when TASK is set.
"""
import json
import runpy
from pathlib import Path

import torch

HERE = Path(__file__).parent
SCRIPT = {script!r}
BOUND = {bound!r}
TASK = {task!r}


def _args(batch):
    return batch if isinstance(batch, tuple) else (batch,)


def test_tuned_model_meets_its_bound(tmp_path):
    import numpy
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from mluverify.judge import compare
    from mluverify.plugins.ort_int8_backend import calibration_reader, session_feeds
    from mluverify.tune._ort import exported_float, split_samples

    script = runpy.run_path(SCRIPT)
    model = script["model"]().eval()
    args = _args(script["eval_inputs"]())
    calibration = [sample for batch in script["calibration_inputs"]() for sample in split_samples(_args(batch))]
    arguments = json.loads((HERE / "quantize_static.json").read_text())
    arguments["quant_format"] = QuantFormat[arguments["quant_format"]]
    for key in ("activation_type", "weight_type"):
        arguments[key] = QuantType[arguments[key]]
    samples = split_samples(args)
    float_path = exported_float(model, samples[0], tmp_path / "model.onnx")
    quantize_static(str(float_path), str(tmp_path / "model.int8.onnx"),
                    calibration_reader(calibration, onnx.load(str(float_path))), **arguments)
    session = onnxruntime.InferenceSession(str(tmp_path / "model.int8.onnx"), providers=["CPUExecutionProvider"],
                                           **json.loads((HERE / "session.json").read_text()))
    runs = [session.run(None, feed) for feed in session_feeds(session, samples)]
    outputs = [torch.from_numpy(numpy.concatenate(values)) for values in zip(*runs)]
    output = outputs[0] if len(outputs) == 1 else tuple(outputs)
    with torch.no_grad():
        expected = model(*args)
'''
