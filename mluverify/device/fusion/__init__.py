"""Fused (MagicMind-like) execution on the emulated MLU.

A model is captured as one graph (``torch.export``; ``torch.jit`` modules through
``TS2EPConverter``), split into ``MLUFusionGroup{i}`` around the ops that cannot fuse
(hook ``mluverify_fusible_ops`` less ``DEBUG_FORCED_FALLBACK_OPS``), and each group runs as one
unit with fused numerics. Ops outside the groups run as per-op device (CNNL) kernels, or on the
CPU when the device has none. Three ways in:

- ``traced = torch.jit.trace(model, x); traced.to("mlu"); traced(x.to("mlu"))``;
- ``torch.compile(model, backend="mlu")``;
- ``fuse(model, example_inputs)``.

``_jit_override_can_fuse_on_mlu(False)`` (``mluverify.device.mlu_model``) turns fusion off: the
same calls then run layer by layer. See docs/fusion.md.

Importing this package loads no compiler (capture, partitioner, group builder): the first
fused call, ``fuse`` or ``fusion_summary`` does, so that a process running an offline model
(``mluverify.device.offline``) never loads it.
"""
from __future__ import annotations

import importlib
from typing import Any

from mluverify.device.fusion import dynamo as _dynamo, script as _script
from mluverify.device.fusion.calls import track_fused_calls
from mluverify.device.fusion.dynamo import compiled_summaries
from mluverify.device.fusion.errors import CaptureError, DebugDirError, FusionError
from mluverify.device.fusion.settings import FusionSettings, current_settings

# Public names defined by the compiler's modules, imported on first access.
_COMPILER_NAMES = {
    "CacheStats": "runtime", "FusedModule": "runtime", "FusionSummary": "runtime",
    "Fallback": "program", "GroupSummary": "program",
}


def fuse(model: Any, example_inputs: Any) -> Any:
    """``model`` fused for ``example_inputs``: see ``mluverify.device.fusion.runtime.fuse``."""
    from mluverify.device.fusion.runtime import fuse as fuse_now

    return fuse_now(model, example_inputs)


def fusion_summary(module: Any) -> Any:
    """The groups, ops and fallbacks of the last fused call of ``module`` (a ``FusionSummary``):
    a module ``fuse`` returned, or a ``torch.jit`` module called on the device."""
    from mluverify.device.fusion.runtime import FusionRuntime

    # A FusedModule holds its runtime; a torch.jit module called on the device keeps its own.
    runtime = getattr(module, "runtime", None) or _script.runtime_of(module)
    if not isinstance(runtime, FusionRuntime):
        raise TypeError(
            f"fusion_summary needs a module returned by fuse() or a torch.jit module called on "
            f"the device, got {type(module).__name__}"
        )
    return runtime.summary()


def __getattr__(name: str) -> Any:
    module = _COMPILER_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

__all__ = [
    "CacheStats", "CaptureError", "DebugDirError", "Fallback", "FusedModule", "FusionError",
    "FusionSettings", "FusionSummary", "GroupSummary", "compiled_summaries", "current_settings",
    "fuse", "fusion_summary", "track_fused_calls",
]

_script.install()
_dynamo.register_if_loaded()
