"""What OpenVINO's PyTorch front end cannot convert (the cases error; waived with ``skip``, a
limitation), on both precisions:

- ``torch.ops.aten.native_layer_norm`` (the OpInfo entry calls the op itself, returning its
  (output, mean, rstd) tuple): ``OpConversionFailure: <built-in function getitem> ...``: the
  converter has no rule for the tuple's ``getitem`` of its statistics (``F.layer_norm``, and the
  op's output alone, convert);
- ``torch.ops.aten.max_pool2d_with_indices_backward``, a backward op: ``No conversion rule found
  for operations: aten.max_pool2d_with_indices_backward``;
- ``torch.histc``: ``No conversion rule found for operations: aten.histc.default``.

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


cases = ((NativeLayerNorm(), (torch.randn(3, 4),)), (MaxPoolBackward(), (torch.randn(1, 1, 2, 2), torch.randn(1, 1, 4, 4))),
         (Histc(), (torch.randn(20),)))
errors = 0
for module, args in cases:
    try:
        expected = module(*args)
        torch.testing.assert_close(run(module, *args), expected[0] if isinstance(expected, tuple) else expected)
        print(f"{type(module).__name__}: converts, runs and agrees with torch")
    except Exception as exc:  # the converter's own error is the finding
        errors += 1
        print(f"{type(module).__name__}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
sys.exit(1 if errors else 0)
