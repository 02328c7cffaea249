"""Accuracy-driven tuning: from "int8 fails" to "keep these layers in int16".

``tune_inference`` finds the fewest layers to keep at higher precision (int8 -> int16 -> float,
qconfig ``layers`` of ``quantize_dynamic_mlu``) and ops to force out of fusion
(``DEBUG_FORCED_FALLBACK_OPS``) so a quantized model on ``mlu`` meets its bound;
``tune_training`` the layers ``adaptive_quantize`` should keep at 16 or 31 bits;
``tune_runtime`` the layers a real int8 runtime (``ort:int8``) should keep in float. The search is
ordered by each layer's and op's own error, bisects, then prunes. A leaf beside the front ends:
it uses the device, the Dumper and the judge; nothing in the core imports it. See docs/tuning.md.
"""
from __future__ import annotations

from mluverify.tune._api import DEFAULT_BOUND, DEFAULT_BUDGET, TuneResult, tune_inference, tune_training
from mluverify.tune._inference import Deployment, deploy
from mluverify.tune._runtime import RUNTIMES, Int8Runtime, tune_runtime
from mluverify.tune._search import STRATEGIES, Knob, SearchResult, Trial
from mluverify.tune._training import with_bits

__all__ = ["DEFAULT_BOUND", "DEFAULT_BUDGET", "Deployment", "Int8Runtime", "Knob", "RUNTIMES", "STRATEGIES",
           "SearchResult", "Trial", "TuneResult", "deploy", "tune_inference", "tune_runtime", "tune_training",
           "with_bits"]
