"""``torch.addcmul(b, w, t)`` of float16 operands through the TorchScript exporter (ort:cpu):
the exported graph returns float32 where torch returns float16 (the exporter casts the product
to float32 before adding). The dynamo exporter (ort:dynamo) keeps float16. In a network the
float32 result meets float16 again: timm's ConvNeXt-V2 (``convnextv2_nano``) in float16, whose
Global Response Norm ends in an ``addcmul``, exports to a model ONNX Runtime refuses to load
("Type parameter (T) of Optype (LayerNormalization) bound to different types (tensor(float) and
tensor(float16))"). Found by the zoo in float16 on ort:cpu; the op suites' and OpInfo's float16
``addcmul`` passed on their values alone until the judge checked output dtypes.

onnxruntime 1.32.0, torch 2.14.1. Upstream: not found reported.
    .venv/bin/python reports/ort/repro_addcmul_half_dtype.py      # exits 1 while the deviation is there
"""
import torch
from ort_compiled import check, run


class Addcmul(torch.nn.Module):
    def forward(self, b: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(b, w, t)


b, w, t = (torch.tensor([1.0, 2.0], dtype=torch.float16) for _ in range(3))
print("dtypes: torch", Addcmul()(b, w, t).dtype, "; ort:cpu", run(Addcmul(), b, w, t, target="ort:cpu").dtype)
check(Addcmul(), b, w, t)  # its comparison checks the dtype too
