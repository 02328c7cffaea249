"""What the ONNX exporters cannot run at all (the cases error; waived with ``skip``):

- ort:cpu (TorchScript exporter, opset 17) has no export of ``adaptive_avg_pool2d`` /
  ``adaptive_max_pool2d`` to an output size that does not divide the input (``SymbolicValueError``),
  of ``aten::col2im`` (``F.fold``), ``aten::_safe_softmax``, ``aten::histc``, of a stable
  ``torch.sort`` (``OnnxExporterError: Unsupported: ONNX export of operator Sort``) nor of
  ``bitwise_and`` on bool tensors (``UnsupportedOperatorError``), nor of ``addmv``, ``addcdiv``,
  ``native_batch_norm``, ``_native_batch_norm_legit``, ``native_group_norm``,
  ``_softmax_backward_data`` and ``max_pool2d_with_indices_backward`` (the OpInfo suite's
  first samples; ``UnsupportedOperatorError``, opset 17); ``adaptive_avg_pool3d`` likewise refuses
  an output size that does not divide the input;
- ort:cpu cannot export the fast paths eager takes for inference (parameters without gradients,
  eval mode): ``nn.TransformerEncoderLayer``'s ``aten::_transformer_encoder_layer_fwd`` and
  ``nn.MultiheadAttention``'s ``aten::_native_multi_head_attention`` (``UnsupportedOperatorError``;
  the suites' ``bert_encoder`` and ``vit_b_16_small`` networks);
- ort:cpu fails inside torch on ``torch.fill(x, True)`` (a bool fill value):
  ``RuntimeError: 0 INTERNAL ASSERT FAILED at ".../jit/ir/alias_analysis.cpp"`` ("We don't have an
  op for aten::full_like"), an error torch asks to be reported;
- ort:cpu exports ``torch.where`` of bool operands as a ``Where`` ONNX Runtime has no CPU kernel
  for (``NOT_IMPLEMENTED``), and ``torch.chunk(x, 3, dim=0)`` of a dimension of size 1 as a
  ``SplitToSequence`` ONNX Runtime refuses to run, and ``index_select`` of a 0-d tensor as a
  ``Gather`` of rank-0 data, which ONNX refuses (``data tensor must have rank >= 1``; ort:dynamo
  exports it right);
- ort:cpu traces the module by running it in the case's precision on torch's CPU kernels, which
  have no float16 ``avg_pool3d`` (``NotImplementedError: "avg_pool3d_out_frame" not implemented
  for 'Half'``);
- ort:dynamo has no onnxscript lowering of ``adaptive_max_pool2d``, ``adaptive_avg_pool3d``,
  ``masked_select`` (a data-dependent size) nor of a stable ``torch.sort``
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
volume, vector, matrix = torch.randn(1, 1, 5, 5, 5), torch.randn(3), torch.randn(2, 3)
# inference modules (no gradients, eval mode): eager takes their fused fast paths
encoder_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval().requires_grad_(False)
attention = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval().requires_grad_(False)
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
    ("ort:cpu", Op("addmv", torch.addmv), (torch.randn(2), matrix, vector)),
    ("ort:cpu", Op("addcdiv", lambda x, a, b: torch.addcdiv(x, a, b, value=0.5)), (vector, vector, vector.exp())),
    ("ort:cpu", Op("native_batch_norm", lambda x, w, b, m, v: torch.native_batch_norm(x, w, b, m, v, True, 0.5, 0.6)[0]),
     (torch.randn(5, 5, 5), *torch.randn(3, 5), torch.rand(5))),
    ("ort:cpu", Op("native_group_norm", lambda x, w, b: torch.native_group_norm(x, w, b, 1, 4, 3, 1, 1e-5)[0]),
     (torch.randn(1, 4, 3), torch.randn(4), torch.randn(4))),
    ("ort:cpu", Op("_softmax_backward_data", lambda g, y: torch.ops.aten._softmax_backward_data(g, y, 1, torch.float32)),
     (matrix, matrix.softmax(1))),
    ("ort:cpu", Op("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 2, 2))), (volume,)),
    ("ort:cpu", Op("fill", lambda x: torch.fill(x, True)), (vector,)),
    ("ort:cpu", Op("_transformer_encoder_layer_fwd", encoder_layer), (torch.randn(2, 5, 8),)),
    ("ort:cpu", Op("_native_multi_head_attention", lambda x: attention(x, x, x, need_weights=False)[0]),
     (torch.randn(2, 5, 8),)),
    ("ort:cpu", Op("index_select", lambda x, i: torch.index_select(x, 0, i)), (torch.tensor(3.0), torch.tensor([0]))),
    ("ort:dynamo", Op("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 2))), (image,)),
    ("ort:dynamo", Op("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 2, 2))), (volume,)),
    ("ort:dynamo", Op("masked_select", torch.masked_select), (vector, flags)),
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
