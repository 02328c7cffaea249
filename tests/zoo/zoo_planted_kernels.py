"""A wrong ``aten::gelu`` (1.5x too large) for the emulated MLU's op-by-op mode (``mlu:cnnl``),
planted through the public hook ``mluverify_device_kernels`` as a third-party plugin would: the
zoo's tests check that it fails the models that use GELU (BERT), names the op, and leaves the
others (a timm CNN with hard-swish) passing. Loaded with ``-p zoo_planted_kernels``."""
import torch

from mluverify import hookimpl


def _gelu_too_large(self, approximate="none"):
    return torch.nn.functional.gelu(self, approximate=approximate) * 1.5


@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::gelu", _gelu_too_large, mode="cnnl")
