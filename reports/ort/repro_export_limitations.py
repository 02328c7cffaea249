"""What the ONNX exporters cannot run at all (the cases error; waived with ``skip``):

- ort:cpu (TorchScript exporter, opset 17) has no export of ``adaptive_avg_pool2d`` /
  ``adaptive_max_pool2d`` to an output size that does not divide the input (``SymbolicValueError``),
  of ``aten::col2im`` (``F.fold``), ``aten::_safe_softmax``, ``aten::histc``, of a stable
  ``torch.sort`` (``OnnxExporterError: Unsupported: ONNX export of operator Sort``) nor of
  ``bitwise_and`` on bool tensors (``UnsupportedOperatorError``);
- ort:cpu exports ``torch.where`` of bool operands as a ``Where`` ONNX Runtime has no CPU kernel
  for (``NOT_IMPLEMENTED``), and ``torch.chunk(x, 3, dim=0)`` of a dimension of size 1 as a
  ``SplitToSequence`` ONNX Runtime refuses to run;
- ort:cpu traces the module by running it in the case's precision on torch's CPU kernels, which
  have no float16 ``avg_pool3d`` (``NotImplementedError: "avg_pool3d_out_frame" not implemented
  for 'Half'``);
- ort:dynamo has no onnxscript lowering of ``adaptive_max_pool2d`` nor of a stable ``torch.sort``
  (``DispatchError: No ONNX function found``); its ``histc`` lowering refuses the default range
  (``aten_histc with min == max (0.0) is not supported``); its bool ``where`` meets the same missing
  ONNX Runtime kernel as ort:cpu's.

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1.
    .venv/bin/python reports/ort/repro_export_limitations.py      # exits 1 while any still errors
"""
import sys

import torch
import torch.nn.functional as F
from ort_compiled import run


class Op(torch.nn.Module):
    def __init__(self, name: str, fn):
        super().__init__()
        self.name, self.fn = name, fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


image, flags = torch.randn(1, 1, 5, 5), torch.tensor([True, False, True])
cases = (
    ("ort:cpu", Op("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 2))), (image,)),
    ("ort:cpu", Op("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 2))), (image,)),
    ("ort:cpu", Op("chunk", lambda x: torch.chunk(x, 3, dim=0)[0]), (torch.randn(1, 4),)),
    ("ort:cpu", Op("col2im", lambda x: F.fold(x, (3, 3), (2, 2))), (torch.randn(1, 4, 4),)),
    ("ort:cpu", Op("_safe_softmax", lambda x: torch.ops.aten._safe_softmax(x, 1)), (torch.randn(2, 3),)),
    ("ort:cpu", Op("histc", lambda x: torch.histc(x, bins=7)), (torch.randn(20),)),
    ("ort:cpu", Op("sort", lambda x: torch.sort(x, dim=1, stable=True)[0]), (torch.randn(2, 5),)),
    ("ort:cpu", Op("bitwise_and", torch.bitwise_and), (flags, flags.flip(0))),
    ("ort:cpu", Op("where", lambda c, a, b: torch.where(c, a, b)), (flags, flags, flags.flip(0))),
    ("ort:cpu", Op("avg_pool3d", lambda x: F.avg_pool3d(x, 2)), (torch.randn(1, 1, 4, 4, 4).half(),)),
    ("ort:dynamo", Op("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 2))), (image,)),
    ("ort:dynamo", Op("sort", lambda x: torch.sort(x, dim=1, stable=True)[0]), (torch.randn(2, 5),)),
    ("ort:dynamo", Op("histc", lambda x: torch.histc(x, bins=7)), (torch.randn(20),)),
    ("ort:dynamo", Op("where", lambda c, a, b: torch.where(c, a, b)), (flags, flags, flags.flip(0))),
)
errors = 0
for target, module, args in cases:
    try:
        torch.testing.assert_close(run(module, *args, target=target), module(*args))
        print(f"{target} {module.name}: runs and agrees with torch")
    except Exception as exc:  # the exporter's or the runtime's own error is the finding
        errors += 1
        print(f"{target} {module.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
sys.exit(1 if errors else 0)
