"""Why the dynamo ONNX exporter (ort:dynamo) returns float32 for a float16 ``abs``, ``sum`` or
``cumsum`` that ends the program: its type-promotion pass computes these ops in float32 (op math)
and inserts the cast back to float16 after them, so the exported FX graph returns the cast; but
the ONNX graph's outputs are looked up by the names in ``exported_program.graph_signature``, which
still name the op itself, the value before the cast (``torch/onnx/_internal/exporter/_core.py``,
"Add user outputs to the graph"). The cast is then dead and removed. The same op followed by
another op (``-abs(x)``) keeps float16: only an op whose result is the program's output loses its
cast, which is why the op suites' and OpInfo's single-op float16 cases show it
(``test_unary[float16-ort:dynamo-abs]``, ``test_reduction[float16-ort:dynamo-sum]``, ``cumsum``)
and the zoo's models do not. The cause of ``repro_dynamo_abs_half_dtype.py`` and
``repro_dynamo_sum_half_dtype.py`` (the fuzzer's finds).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_half_output_cast_dropped.py      # exits 1 while it holds
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
PROGRAMS = {"abs": torch.abs, "sum": torch.sum, "cumsum": lambda x: torch.cumsum(x, 0),
            "-abs (abs not last)": lambda x: -torch.abs(x)}


class Program(torch.nn.Module):
    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


x = torch.tensor([0.5, -1.25, 3.0], dtype=torch.float16)
wrong = []
for name, function in PROGRAMS.items():
    exported = torch.onnx.export(Program(function), (x,), dynamo=True, verbose=False)
    returned = [node for node in exported.exported_program.graph.nodes if node.op == "output"][0].args[0]
    signed = [spec.arg.name for spec in exported.exported_program.graph_signature.output_specs]
    onnx_out = exported.model.graph.outputs[0]
    print(f"{name}: torch {function(x).dtype}; FX graph returns {[node.name for node in returned]}, "
          f"signature names {signed}; ONNX output {onnx_out.name!r} of {onnx_out.dtype}")
    if str(onnx_out.dtype) != "FLOAT16":
        wrong.append(name)
print(f"DEVIATION: float32 outputs for {', '.join(wrong)}" if wrong else "every output is float16")
sys.exit(1 if wrong else 0)
