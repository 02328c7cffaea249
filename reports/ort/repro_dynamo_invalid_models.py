"""The dynamo ONNX exporter (ort:dynamo) writes models that break ONNX's type constraints, so
ONNX Runtime refuses to load them, for programs eager computes (the sixth fuzz campaign's
``3e1335b4683e``, ``8b130ec918e1``, ``359e4555d357``; docs/fuzzing.md):

- ``torch.stack([bool, float32])``: eager promotes to float32; the export is one ``Concat`` of
  ``tensor(bool)`` and ``tensor(float)`` ("Type parameter (T) of Optype (Concat) bound to
  different types");
- ``torch.square`` of int8: ``Pow`` of ``tensor(int8)``, which ``Pow`` does not take;
- ``torch.sum(x, dim, dtype=torch.int8)`` of int8: ``ReduceSum`` of ``tensor(int8)``, likewise;
- ``torch.relu`` of uint8: ``Relu`` of ``tensor(uint8)`` (phase B's ``493a7886d332``; the
  TorchScript exporter, ort:cpu, writes the same ``Relu``);
- ``torch.native_batch_norm`` in training of float16 operands: its saved inverse standard
  deviation is a ``Div`` of ``tensor(float)`` and ``tensor(float16)`` (the OpInfo suite's
  ``native_batch_norm`` and ``_native_batch_norm_legit`` first samples in float16).

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_dynamo_invalid_models.py      # exits 1 while any still errors
"""
import sys

import torch
from ort_compiled import run


class StackBoolFloat(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.stack([a > 0, b], dim=0)


class Square(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.square(x)


class ReluUint8(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.to(torch.uint8))


class BatchNormInvstd(torch.nn.Module):
    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
                var: torch.Tensor) -> torch.Tensor:
        return torch.native_batch_norm(x, weight, bias, mean, var, True, 0.5, 0.6)[2]


class SumKeepDtype(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=0, dtype=x.dtype)


int8 = torch.tensor([[3, -4], [100, 27]], dtype=torch.int8)
cases = ((StackBoolFloat(), (torch.tensor([1.0, -1.0]), torch.tensor([0.5, 2.0]))), (Square(), (int8,)),
         (SumKeepDtype(), (int8,)), (ReluUint8(), (torch.tensor([3.0, 7.0]),)),
         (BatchNormInvstd(), (torch.randn(5, 5, 5).half(), *torch.randn(3, 5).half(), torch.rand(5).half())))
errors = 0
for module, args in cases:
    try:
        torch.testing.assert_close(run(module, *args, target="ort:dynamo"), module(*args))
        print(f"ort:dynamo {type(module).__name__}: runs and agrees with torch")
    except Exception as exc:  # ONNX Runtime's refusal of the exported model is the finding
        errors += 1
        print(f"ort:dynamo {type(module).__name__}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
sys.exit(1 if errors else 0)
