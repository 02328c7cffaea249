"""``F.batch_norm(x, running_mean, running_var, training=True)`` on the dynamo exporter
(ort:dynamo): the exported model normalises with the running statistics, as in inference,
instead of the batch's own mean and variance; its output equals eval-mode batch norm exactly, so
a training-mode batch norm is silently an inference one (here 4.0 off at worst on a batch of
mean 2 and scale 3). The TorchScript exporter (ort:cpu) exports it in training mode, with a
warning, and agrees with torch. The OpInfo suite's first samples of ``nn.functional.batch_norm``
(rel_mse 0.26 float32, 0.60 float16), ``native_batch_norm`` and ``_native_batch_norm_legit``
(6.8) on ort:dynamo.

onnxruntime 1.32.0, onnxscript 0.7.2, torch 2.14.1. Upstream: not found reported as a wrong
result (microsoft/onnxscript#1791, closed, discussed rewriting BatchNorm training=True to False
for models torch.export marks as training).
    .venv/bin/python reports/ort/repro_dynamo_batch_norm_training.py      # exits 1 while the deviation is there
"""
import torch
import torch.nn.functional as F
from ort_compiled import check


class TrainingBatchNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, mean.clone(), var.clone(), training=True, momentum=0.5, eps=0.6)


torch.manual_seed(0)
check(TrainingBatchNorm(), torch.randn(3, 4, 5) * 3 + 2, torch.zeros(4), torch.ones(4))
