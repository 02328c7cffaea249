"""What the ONNX exporters cannot run at all (the cases error; waived with ``skip``, a limitation):

- ort:cpu (TorchScript exporter): ``adaptive_avg_pool2d`` / ``adaptive_max_pool2d`` to an output
  size that does not divide the input (``SymbolicValueError: Unsupported: ONNX export of operator
  adaptive_avg_pool2d, output size that are not factor of input size``);
- ort:cpu: ``torch.chunk(x, 3, dim=0)`` of a dimension of size 1 exports a ``SplitToSequence``
  that ONNX Runtime refuses to run;
- ort:dynamo: ``adaptive_max_pool2d`` has no onnxscript lowering (``DispatchError: No ONNX
  function found for aten.adaptive_max_pool2d``).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1.
    .venv/bin/python reports/ort/repro_export_limitations.py      # exits 1 while any still errors
"""
import sys

import torch
import torch.nn.functional as F
from ort_compiled import run


class AdaptiveAvg(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, (2, 2))


class AdaptiveMax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_max_pool2d(x, (2, 2))


class Chunk(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.chunk(x, 3, dim=0)[0]


image = torch.randn(1, 1, 5, 5)
cases = (("ort:cpu", AdaptiveAvg(), image), ("ort:cpu", AdaptiveMax(), image),
         ("ort:cpu", Chunk(), torch.randn(1, 4)), ("ort:dynamo", AdaptiveMax(), image))
errors = 0
for target, module, x in cases:
    try:
        torch.testing.assert_close(run(module, x, target=target), module(x))
        print(f"{target} {type(module).__name__}: runs and agrees with torch")
    except Exception as exc:  # the exporter's or the runtime's own error is the finding
        errors += 1
        print(f"{target} {type(module).__name__}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
sys.exit(1 if errors else 0)
