"""Errors raised on purpose by fusion (subclasses of mluverify's own errors)."""
from __future__ import annotations

from mluverify.errors import MluverifyError


class FusionError(MluverifyError):
    """Fused execution could not be set up or run as asked."""


class CaptureError(FusionError):
    """A model could not be captured as one graph (e.g. data-dependent control flow).

    ``reason`` is one line naming the capture step and the underlying error; the fused module
    then runs layer by layer and records this reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DebugDirError(FusionError, OSError):
    """``FUSED_KERNEL_DEBUG`` is set but its output directory cannot be written."""


class OfflineModelError(FusionError):
    """An offline model cannot be saved (the model does not fuse whole), read (missing,
    corrupted, saved by another mluverify version) or run (inputs it was not built for); the
    message names the file."""
