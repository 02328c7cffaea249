"""OpenVINO's linear interpolation to an output size of 1 takes the first element: torch's
``F.interpolate(x, size=1, mode="linear" | "bilinear" | "trilinear", align_corners=False)``
samples the input's centre (``arange(4.)`` -> 1.5), OpenVINO returns ``x[0]`` (0.0). Every
other output size agrees. The PyTorch front end's Interpolate uses the ``pytorch_half_pixel``
coordinate rule, which by ONNX's definition maps an output of size 1 to coordinate 0 (asked
about in onnx/onnx#4276), while torch has sampled the centre since 1.9. It is no precision
question: float32 (the f32 hint) and the default bf16 give the same. The suites'
upsample_trilinear3d case on openvino:default (rel_mse 0.895) drew an output size of 1 in one
dimension; openvino:cpu's drawn example did not.

openvino 2026.4.1, torch 2.14.1. Upstream: not found reported for OpenVINO.
    .venv/bin/python reports/openvino/repro_interpolate_size_one.py      # exits 1 while the deviation is there
"""
import torch
import torch.nn.functional as F
from openvino_compiled import check


class Linear(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=1, mode="linear", align_corners=False)


check(Linear(), torch.arange(4.0).reshape(1, 1, 4))
