"""A plugin that plants two signed-zero bugs in the emulated MLU's kernels, as a user plugin
would (``mluverify_device_kernels``, registered after the built-ins, so it wins):

* ``aten::rsqrt``: -0.0 taken as +0.0, so rsqrt(-0.0) = +inf (IEEE 754: -inf);
* ``aten::div.Tensor``: a divisor of -0.0 taken as +0.0, so 1 / -0.0 = +inf (IEEE 754: -inf).

Both are right everywhere else, so only inputs holding -0.0 where it matters see them.
Loaded with ``-p unsigned_zero_plugin``.
"""
from __future__ import annotations

from mluverify import hookimpl

PLANTED_OPS = ("rsqrt", "div")  # the op suite's names of the ops whose kernels are wrong


def _unsigned_zero(x):
    import torch

    if not isinstance(x, torch.Tensor):  # a fused program may pass a Python number
        return 0.0 if x == 0 else x
    return torch.where(x == 0, torch.zeros_like(x), x)


def _rsqrt_of_unsigned_zero(self):
    import torch

    return torch.ops.aten.rsqrt.default(_unsigned_zero(self))


def _div_by_unsigned_zero(self, other):
    import torch

    return torch.ops.aten.div.Tensor(self, _unsigned_zero(other))


@hookimpl
def mluverify_device_kernels(registry) -> None:
    registry.register("aten::rsqrt", _rsqrt_of_unsigned_zero)
    registry.register("aten::div.Tensor", _div_by_unsigned_zero)
