"""Wrong kernels for the emulated MLU's op-by-op mode (``mlu:cnnl``), planted through the public
hook ``mluverify_device_kernels`` as a third-party plugin would, for the fuzzer's tests:

- ``aten::gelu`` 1.5x too large;
- ``aten::rsqrt`` takes -0.0 as +0.0: ``rsqrt(-0.0)`` is +inf where IEEE 754 says -inf;
- ``aten::div.Tensor`` takes a divisor -0.0 as +0.0: ``1 / -0.0`` is +inf, not -inf.

Every other value is the CPU's, so only a program that reaches one of these ops (the last two
only at a signed zero) can tell. Loaded with ``--plugin fuzz_planted_kernels``.
"""
import torch

from mluverify import hookimpl


def _unsigned_zeros(t: torch.Tensor) -> torch.Tensor:
    return torch.where(t == 0, torch.zeros_like(t), t)


def _gelu_too_large(self, approximate="none"):
    return torch.nn.functional.gelu(self, approximate=approximate) * 1.5


def _rsqrt_unsigned_zero(self):
    return torch.rsqrt(_unsigned_zeros(self))


def _div_unsigned_zero(self, other):
    return torch.div(self, _unsigned_zeros(other))


@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::gelu", _gelu_too_large, mode="cnnl")
    registry.register("aten::rsqrt", _rsqrt_unsigned_zero, mode="cnnl")
    registry.register("aten::div.Tensor", _div_unsigned_zero, mode="cnnl")
