"""The emulated MLU's built-in training kernels (backward ops, losses, dropout).

Installed by the device after its CNNL set (``mluverify.device.builtin_kernels``), so that its
registrations of shared ops win over that set's; a plugin's kernel
(``mluverify_device_kernels``) still wins over both. Each kernel is built with the numerics
builders of ``mluverify.device.cnnl_ops``, so backward ops follow the same profile as forward
ones (``docs/device.md``):

* *matmul*: the convolution backward (its grad_input and grad_weight are products of
  grad_output with the weight and with the input); the backward of ``mm``/``addmm``/``bmm`` is
  itself ``mm``/``bmm``, already a device kernel;
* *accumulate*: softmax / log-softmax, batch / layer / group norm, pooling and upsampling
  backward (gradients summed where windows overlap), ``nll_loss`` (and so ``cross_entropy``),
  the embedding backward (a scatter-add), the bias gradient of a convolution;
* *elementwise*: activation backward, dropout backward, ``masked_fill`` and ``bitwise_not``
  (``cross_entropy`` with label smoothing), ``lerp``/``addcmul``/``addcdiv`` (Adam's update).

The layers of ``adaptive_quantize`` get their exact integer forward and backward kernels here
too (``mluverify.device.quantization._adaptive``).

Dropout draws its masks from the device's own generator (``mluverify.device.training``), in
float32 whatever the activation dtype, with the CPU's algorithm: a CPU run seeded alike draws
the same masks. Ops without a kernel here run as counted CPU fallbacks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch

    from mluverify.device.kernels import KernelRegistry

# Training ops by numerics class (docs/training.md): activation / dropout backward, the
# masked_fill / bitwise_not of cross_entropy's label smoothing, the optimizers' updates ...
ELEMENTWISE_OPS = (
    "threshold_backward", "hardtanh_backward", "leaky_relu_backward", "sigmoid_backward",
    "tanh_backward", "gelu_backward", "elu_backward", "native_dropout_backward",
    "hardswish_backward", "hardsigmoid_backward", "glu_backward",  # the forward kernels are the device's too
    "masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor", "bitwise_not",
    # optimizer updates (Adam): elementwise
    "lerp.Scalar", "lerp_.Scalar", "lerp.Tensor", "lerp_.Tensor", "addcmul", "addcmul_", "addcdiv", "addcdiv_",
)

# ... pooling / norm / embedding / upsampling backward, and nll_loss (so cross_entropy) both ways.
ACCUMULATING_OPS = (
    "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
    "avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool3d_backward",
    "native_batch_norm_backward", "native_layer_norm_backward", "native_group_norm_backward",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "embedding_dense_backward",
    "upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
    "upsample_linear1d_backward", "upsample_bilinear2d_backward", "upsample_trilinear3d_backward",
)

SOFTMAX_BACKWARD = ("_softmax_backward_data", "_log_softmax_backward_data")


def _overload(name: str):
    from mluverify.device.kernels import resolve_overload

    return resolve_overload(f"aten::{name}")


def convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    """``convolution_backward_overrideable``: grad_input and grad_weight are products computed as
    the forward convolution's (``contractions.device_result``: quantized on MLU270, TF32 and
    split across cores on MLU370), the bias gradient a per-core sum of grad_output."""
    from mluverify.device import cnnl_ops
    from mluverify.device._conv_gradients import InputGradient, WeightGradient, product_kernel

    geometry = (tuple(stride), tuple(padding), tuple(dilation), bool(transposed), tuple(output_padding), groups)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = product_kernel(InputGradient(*geometry, tuple(input.shape)), grad_output, weight, True)
    if output_mask[1]:
        grad_weight = product_kernel(WeightGradient(*geometry, tuple(weight.shape)), input, grad_output, False)
    if output_mask[2]:
        dims = [d for d in range(grad_output.dim()) if d != 1]
        grad_bias = cnnl_ops.REDUCTIONS["sum.dim_IntList"](grad_output, dims)
    return grad_input, grad_weight, grad_bias


def softmax_backward(accumulating_kernel: Callable) -> Callable:
    """A softmax backward whose float16 operands are computed widened: the op is told so, since
    the CPU refuses float32 gradients of a float16 input."""
    import torch

    def kernel(grad_output, output, dim, input_dtype):
        compute_dtype = torch.float32 if input_dtype == torch.float16 else input_dtype
        return accumulating_kernel(grad_output, output, dim, compute_dtype)

    return kernel


def _noise(shape, p: float, generator: "torch.Generator | None") -> "torch.Tensor":
    """Bernoulli(p) draws in float32 from the device's generator (or the one given)."""
    import torch

    from mluverify.device.training import default_generator

    return torch.empty(shape, dtype=torch.float32).bernoulli_(p, generator=generator or default_generator())


def native_dropout(input, p, train):
    """Dropout as the CPU's ``native_dropout`` computes it, with the device generator's mask."""
    import torch

    if train is False or p == 0 or input.numel() == 0:
        return input.clone(), torch.ones_like(input, dtype=torch.bool)
    if p == 1:
        return torch.zeros_like(input), torch.zeros_like(input, dtype=torch.bool)
    keep = 1.0 - p
    noise = _noise(input.shape, keep, None)
    return input.mul(noise.to(input.dtype)).mul_(1.0 / keep), noise.bool()


def bernoulli_(self, p=0.5, *, generator=None):
    """In-place Bernoulli draws (feature dropout's channel mask) from the device generator."""
    return self.copy_(_noise(self.shape, p, generator))


def register(registry: KernelRegistry) -> None:
    """Register the training kernels in ``registry``."""
    from mluverify.device import cnnl_ops

    for name in ELEMENTWISE_OPS:
        registry.register(f"aten::{name}", cnnl_ops.elementwise(_overload(name)))
    for name in ACCUMULATING_OPS:
        registry.register(f"aten::{name}", cnnl_ops.accumulating(_overload(name)))
    for name in SOFTMAX_BACKWARD:
        registry.register(f"aten::{name}", softmax_backward(cnnl_ops.accumulating(_overload(name))))
    registry.register("aten::convolution_backward_overrideable", convolution_backward)
    registry.register("aten::native_dropout", native_dropout)
    registry.register("aten::bernoulli_.float", bernoulli_)
    _register_adaptive_quantization(registry)


def _register_adaptive_quantization(registry: KernelRegistry) -> None:
    """The exact integer kernels of ``adaptive_quantize``'s layers (docs/training.md)."""
    from mluverify.device.quantization import _adaptive

    registry.register("mluverify::adaptive_conv", _adaptive.exact_adaptive_conv)
    registry.register("mluverify::adaptive_conv_backward", _adaptive.exact_adaptive_conv_backward)
    registry.register("mluverify::adaptive_linear", _adaptive.exact_adaptive_linear)
    registry.register("mluverify::adaptive_linear_backward", _adaptive.exact_adaptive_linear_backward)
