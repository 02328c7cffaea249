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
"""
from __future__ import annotations

from mluverify.device.fusion import dynamo as _dynamo, script as _script
from mluverify.device.fusion.dynamo import compiled_summaries
from mluverify.device.fusion.errors import CaptureError, DebugDirError, FusionError
from mluverify.device.fusion.program import Fallback, GroupSummary
from mluverify.device.fusion.runtime import CacheStats, FusedModule, FusionSummary, fuse, fusion_summary
from mluverify.device.fusion.settings import FusionSettings, current_settings

__all__ = [
    "CacheStats", "CaptureError", "DebugDirError", "Fallback", "FusedModule", "FusionError",
    "FusionSettings", "FusionSummary", "GroupSummary", "compiled_summaries", "current_settings",
    "fuse", "fusion_summary",
]

_script.install()
_dynamo.register_if_loaded()
