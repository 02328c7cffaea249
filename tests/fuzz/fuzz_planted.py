"""A plugin with planted bugs for the fuzzer's tests: target ``planted:fused`` computes on the
CPU but scales a matrix product by 1.5 when its first operand is a transposed view (a wrong
result only where a transpose feeds a matmul, as a fused layout bug would be);
``planted:crash`` aborts the process when the program computes an exponential.

Planted with a plain target wrapper (a ``TorchDispatchMode`` around the CPU eager run), not
through the emulated MLU's fused kernels, so the bug does not depend on how fusion groups form.
"""
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify import hookimpl
from mluverify.core.backends import Backend, Execution

_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.bmm.default}


def transposed(t: torch.Tensor) -> bool:
    """Column-major in its last two dims: what ``transpose`` of a contiguous matrix gives."""
    return t.dim() >= 2 and t.size(-1) > 1 and t.size(-2) > 1 and t.stride(-2) == 1 and t.stride(-1) != 1


class _PlantedKernels(TorchDispatchMode):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.mode == "crash" and func is torch.ops.aten.exp.default:
            os.abort()
        out = func(*args, **(kwargs or {}))
        if self.mode == "fused" and func in _MATMULS and transposed(args[0]):
            out = out * 1.5
        return out


class PlantedBackend(Backend):
    name = "planted"
    modes = {"fused": "cnml", "crash": "cnml"}

    def execute(self, fn, args, kwargs, *, case):
        with _PlantedKernels(case.mode), torch.no_grad():
            return Execution(fn(*args, **kwargs))


@hookimpl
def mluverify_add_backends(registry):
    registry.add(PlantedBackend())
