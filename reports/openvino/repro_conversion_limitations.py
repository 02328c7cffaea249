"""What OpenVINO's PyTorch front end cannot convert (the cases error; waived with ``skip``, a
limitation), on both precisions:

- ``torch.ops.aten.native_layer_norm`` (the OpInfo entry calls the op itself, returning its
  (output, mean, rstd) tuple): ``OpConversionFailure: <built-in function getitem> ...``: the
  converter has no rule for the tuple's ``getitem`` of its statistics (``F.layer_norm``, and the
  op's output alone, convert);
- ``torch.ops.aten.max_pool2d_with_indices_backward``, a backward op: ``No conversion rule found
  for operations: aten.max_pool2d_with_indices_backward``;
- ``torch.histc``: ``No conversion rule found for operations: aten.histc.default``;
- found by the OpInfo suite's first samples (make verify-real's selection): ``native_batch_norm``,
  ``_native_batch_norm_legit`` and ``native_group_norm`` called as ops (the same tuple
  ``getitem``); no conversion rule for ``addmv``, ``masked_select`` (a data-dependent size) nor
  ``round(x, decimals=d)`` (``aten.round.decimals``); ``index_select`` of a 0-d tensor and
  ``avg_pool2d`` with ``divisor_override`` fail ("Conversion is failed for: aten.index_select",
  "aten.avg_pool2d"): OpenVINO refuses the divisor the ONNX exporters drop silently
  (reports/ort/repro_avg_pool_divisor_override.py).

openvino 2026.4.1, torch 2.14.1.
    .venv/bin/python reports/openvino/repro_conversion_limitations.py      # exits 1 while any still errors
"""
import sys

import torch
import torch.nn.functional as F
from openvino_compiled import run


class NativeLayerNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:  # the whole tuple, as the OpInfo case returns it
        return torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)


class MaxPoolBackward(torch.nn.Module):
    def forward(self, grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        _, indices = F.max_pool2d(x, 2, return_indices=True)
        return torch.ops.aten.max_pool2d_with_indices_backward(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)


class Histc(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.histc(x, bins=7)


class Op(torch.nn.Module):
    def __init__(self, name: str, fn):
        super().__init__()
        self.name, self.fn = name, fn

    def forward(self, *args: torch.Tensor):
        return self.fn(*args)


vector, matrix = torch.randn(3), torch.randn(2, 3)
cases = ((NativeLayerNorm(), (torch.randn(3, 4),)), (MaxPoolBackward(), (torch.randn(1, 1, 2, 2), torch.randn(1, 1, 4, 4))),
         (Histc(), (torch.randn(20),)),
         (Op("native_batch_norm", lambda x, w, b, m, v: torch.native_batch_norm(x, w, b, m, v, True, 0.5, 0.6)),
          (torch.randn(5, 5, 5), *torch.randn(3, 5), torch.rand(5))),
         (Op("native_group_norm", lambda x, w, b: torch.native_group_norm(x, w, b, 1, 4, 3, 1, 1e-5)),
          (torch.randn(1, 4, 3), torch.randn(4), torch.randn(4))),
         (Op("addmv", torch.addmv), (torch.randn(2), matrix, vector)),
         (Op("masked_select", torch.masked_select), (vector, torch.tensor([True, False, True]))),
         (Op("round_decimals", lambda x: torch.round(x, decimals=3)), (vector,)),
         (Op("index_select_0d", lambda x, i: torch.index_select(x, 0, i)), (torch.tensor(3.0), torch.tensor([0]))),
         (Op("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 3, 1, 1, divisor_override=2)), (torch.ones(1, 1, 3, 3),)))
errors = 0
for module, args in cases:
    try:
        expected = module(*args)
        torch.testing.assert_close(run(module, *args), expected[0] if isinstance(expected, tuple) else expected)
        print(f"{getattr(module, 'name', type(module).__name__)}: converts, runs and agrees with torch")
    except Exception as exc:  # the converter's own error is the finding
        errors += 1
        print(f"{getattr(module, 'name', type(module).__name__)}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
sys.exit(1 if errors else 0)
