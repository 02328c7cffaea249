"""A plugin that plants subtle bugs in the emulated MLU's kernels, for the planted-bug check.

Overrides through ``mluverify_device_kernels`` (registered after the built-ins, so it wins):

* ``aten::addmm``: the bias (``self``) is dropped, as a kernel that forgets the epilogue;
* ``aten::convolution_overrideable``: the bias is dropped;
* ``aten::_softmax``: results 1 % too large (a wrong reciprocal of the sum);
* ``aten::mul.Tensor``: results 1 % too large;
* ``aten::max_pool2d_with_indices``: the window is one element too large on the bottom/right
  edge (same output shape).

Registered for the layer-by-layer mode, they also reach fused groups, which run every op's
``cnml`` kernel and fall back to its ``cnnl`` one. A fused engine is judged by the 2 % bound,
under which a 1 % error is no bug: the two scalings also get a ``cnml`` kernel of their own that
is 6 % off (three times that bound, as 1 % is for the layer-by-layer 0.3 %).

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


def _softmax_scaled(factor: float):
    def kernel(self, dim, half_to_float):
        import torch

        return torch.ops.aten._softmax.default(self, dim, half_to_float) * factor

    return kernel


def _mul_scaled(factor: float):
    def kernel(self, other):
        import torch

        return torch.ops.aten.mul.Tensor(self, other) * factor

    return kernel


def _max_pool2d_window_plus_one(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    import torch
    import torch.nn.functional as F

    kernel = [k + 1 for k in (kernel_size if len(kernel_size) == 2 else [kernel_size[0]] * 2)]
    stride = stride or kernel_size
    padded = F.pad(self, (0, 1, 0, 1), value=float("-inf"))
    values, indices = torch.ops.aten.max_pool2d_with_indices.default(padded, kernel, stride, padding, dilation,
                                                                      ceil_mode)
    # Indices into the unpadded input (the -inf border never wins), so a backward using them
    # stays in bounds: the planted bug shows as wrong values, not as a crash.
    width = self.shape[-1]
    return values, indices // (width + 1) * width + indices % (width + 1)


@hookimpl
def mluverify_device_kernels(registry) -> None:
    registry.register("aten::addmm", _addmm_without_bias)
    registry.register("aten::convolution_overrideable", _convolution_without_bias)
    registry.register("aten::_softmax", _softmax_scaled(1.01))
    registry.register("aten::mul.Tensor", _mul_scaled(1.01))
    registry.register("aten::_softmax", _softmax_scaled(1.06), mode="cnml")
    registry.register("aten::mul.Tensor", _mul_scaled(1.06), mode="cnml")
    registry.register("aten::max_pool2d_with_indices", _max_pool2d_window_plus_one)

