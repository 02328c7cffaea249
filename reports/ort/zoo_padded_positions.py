"""Where the zoo's float16 decoders deviate on ort:cpu (docs/zoo.md, "float16 on the real
compilers"): each model exported in float16 as ort:cpu exports it, run by onnxruntime's CPU
provider, its prompt logits against torch's float32 run, split into the left-padded positions of
the second sequence and the others; and, for the first model, the first node whose onnxruntime
output departs from onnx's own reference evaluator of the same graph (rel > 1e-2). Needs the zoo
and ort extras.
    .venv/bin/python reports/ort/zoo_padded_positions.py hf_qwen3 hf_llama hf_qwen2 hf_mistral
"""
import copy
import io
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).parents[2] / "suites"))
from zoo.zoo_models import eager, zoo_models  # noqa: E402


def logits(output) -> torch.Tensor:
    """The prompt's logits: the zoo's decoder case returns them first."""
    return output[0] if isinstance(output, (tuple, list)) else output.logits


class Logits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return logits(self.model(*args))


def relative(actual, expected) -> float:
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    return float(np.sqrt(((actual - expected) ** 2).sum() / (expected ** 2).sum()))


def first_departing_node(graph: onnx.ModelProto, feeds: dict) -> str:
    names = [name for node in graph.graph.node for name in node.output if name]
    extended = onnx.ModelProto()
    extended.CopyFrom(graph)
    present = {output.name for output in extended.graph.output}
    extended.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names if name not in present)
    session = onnxruntime.InferenceSession(extended.SerializeToString(), providers=["CPUExecutionProvider"])
    runtime = dict(zip([output.name for output in session.get_outputs()], session.run(None, feeds)))
    reference = dict(zip(names, ReferenceEvaluator(graph).run(names, feeds)))
    for node in graph.graph.node:
        for name in node.output:
            got, want = runtime.get(name), reference[name] if name else None
            if got is not None and got.dtype.kind == "f" and np.isfinite(want).all() and relative(got, want) > 1e-2:
                return f"{node.op_type} {node.name}: rel {relative(got, want):.3g}"
    return "none"


for index, name in enumerate(sys.argv[1:]):
    model, args = eager(zoo_models()[name])
    with torch.no_grad():
        expected = logits(model(*args)).numpy()
        half = Logits(copy.deepcopy(model).half()).eval()
        buffer = io.BytesIO()
        torch.onnx.export(half, args, buffer, dynamo=False, opset_version=17)
    graph = onnx.load_from_string(buffer.getvalue())
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    feeds = {given.name: a.numpy() for given, a in zip(session.get_inputs(), args)}
    got = session.run(None, feeds)[0].astype(np.float32)
    kept = args[1][:, :got.shape[1]].bool().numpy()
    print(f"{name}: all {relative(got, expected):.4g}, unpadded {relative(got[kept], expected[kept]):.3g}, "
          f"padded {relative(got[~kept], expected[~kept]):.3g}", flush=True)
    if index == 0:
        print(f"  first node off onnx's reference evaluator: {first_departing_node(graph, feeds)}")
