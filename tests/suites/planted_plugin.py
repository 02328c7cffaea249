"""A plugin that plants subtle bugs in the emulated MLU's kernels, for the planted-bug check.

Overrides through ``mluverify_device_kernels`` (registered after the built-ins, so it wins):

* ``aten::addmm``: the bias (``self``) is dropped, as a kernel that forgets the epilogue;
* ``aten::convolution_overrideable``: the bias is dropped;
* ``aten::_softmax``: results 1 % too large (a wrong reciprocal of the sum);
* ``aten::mul.Tensor``: results 1 % too large;
* ``aten::max_pool2d_with_indices``: the window is one element too large on the bottom/right
  edge (same output shape).

Loaded with ``-p planted_plugin``, like any third-party mluverify plugin.
"""
from __future__ import annotations

from mluverify import hookimpl

PLANTED_OPS = ("addmm", "convolution_overrideable", "_softmax", "mul.Tensor", "max_pool2d_with_indices")


def _addmm_without_bias(self, mat1, mat2, *, beta=1, alpha=1):
    import torch

    return torch.mm(mat1, mat2) * alpha


def _convolution_without_bias(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    import torch

    return torch.ops.aten.convolution.default(input, weight, None, stride, padding, dilation, transposed,
                                              output_padding, groups)


def _softmax_scaled(self, dim, half_to_float):
    import torch

    return torch.ops.aten._softmax.default(self, dim, half_to_float) * 1.01


def _mul_scaled(self, other):
    import torch

    return torch.ops.aten.mul.Tensor(self, other) * 1.01


def _max_pool2d_window_plus_one(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    import torch
    import torch.nn.functional as F

    kernel = [k + 1 for k in (kernel_size if len(kernel_size) == 2 else [kernel_size[0]] * 2)]
    stride = stride or kernel_size
    padded = F.pad(self, (0, 1, 0, 1), value=float("-inf"))
    return torch.ops.aten.max_pool2d_with_indices.default(padded, kernel, stride, padding, dilation, ceil_mode)


@hookimpl
def mluverify_device_kernels(registry) -> None:
    registry.register("aten::addmm", _addmm_without_bias)
    registry.register("aten::convolution_overrideable", _convolution_without_bias)
    registry.register("aten::_softmax", _softmax_scaled)
    registry.register("aten::mul.Tensor", _mul_scaled)
    registry.register("aten::max_pool2d_with_indices", _max_pool2d_window_plus_one)

