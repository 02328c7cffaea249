"""``BoundCall``: a case's callable as a module, for the ``mlu`` back end's fused modes.

Kept apart from ``mlu_backend`` (which imports no torch at module level) and from
``mluverify.device`` (whose import registers the emulated device, which must not happen when a
real ``torch_mlu`` runs).
"""
from __future__ import annotations

from typing import Any, Callable

from torch import nn


class BoundCall(nn.Module):
    """A callable (module, function or op) with its keyword arguments bound, as a module.

    ``display_name`` names the callable in messages (fusion's reasons say which model did not
    fuse, not "BoundCall").
    """

    def __init__(self, fn: Callable, kwargs: dict) -> None:
        super().__init__()
        self.fn = fn
        self.kwargs = kwargs
        self.display_name = type(fn).__name__ if isinstance(fn, nn.Module) else getattr(fn, "__name__", repr(fn))

    def forward(self, *args: Any) -> Any:
        return self.fn(*args, **self.kwargs)
