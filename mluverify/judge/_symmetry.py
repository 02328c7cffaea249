"""The zero-sum rule: a gradient that is exactly 0 by symmetry, judged against the truth.

A bias's gradient is its layer's output gradient ``g`` summed over the ``terms`` positions the
bias is added at. Where the layer's outputs enter only through a softmax that is unchanged by a
shift (an attention key bias adds ``q.b`` to every key's score), those sums are exactly 0: the
CPU's float32 gradient is its own rounding, and rel_mse against it judges noise by noise. What
the device's sum may be is bounded instead by the precision of its summands: with ``e`` the error
of the device's ``g`` and ``||e|| <= bound ||g||`` (the rel_mse bound every tensor of the mode is
held to), Cauchy-Schwarz over each bias element's ``terms`` summands gives

    ||sum(e)|| <= sqrt(terms) ||e|| <= bound * scale,   scale = sqrt(terms) ||g||

and summing ``terms`` values in the case's dtype adds at most ``(terms - 1) u`` relative to the
same scale (``u`` the dtype's unit roundoff). Where the float64 gradient is within that allowance,
``||golden|| <= bound * scale``, a relative error has nothing to hold the device to (a device
within its precision may be anywhere within ``bound * scale`` of a sum that small), so the rule
judges ``||actual - golden|| / scale`` against ``bound + (terms - 1) u``; elsewhere the plain
verdict stands.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from mluverify.judge._judge import Verdict, _as_leaf
from mluverify.judge._tolerance import Tolerance

# Unit roundoff of the dtype the device sums in (the bound's second term).
UNIT_ROUNDOFF: Mapping[str, float] = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11,
                                      "bfloat16": 2.0**-8}
ZERO_SUM_METRIC = "zero_sum_error"


@dataclass(frozen=True)
class TermSum:
    """How a gradient is summed, from the float64 run: ``golden`` the float64 gradient, ``terms``
    the summands per element, ``scale`` ``sqrt(terms) * ||g||`` (``g`` the summed tensor)."""

    golden: Any
    terms: int
    scale: float


def zero_sum_applies(tolerance: Tolerance) -> bool:
    """Whether the rule's premise holds: the tolerance bounds rel_mse (not the golden rule)."""
    return not tolerance.golden and tolerance.metric == "rel_mse"


def _flat(value: Any) -> np.ndarray:
    return _as_leaf(value).values.astype(np.float64).reshape(-1)


def judge_zero_sum(verdict: Verdict, actual: Any, summed: TermSum, tolerance: Tolerance, dtype: str) -> Verdict:
    """``verdict`` (the plain comparison with the CPU) replaced by the zero-sum rule when the
    float64 gradient is within ``bound * scale`` of 0 and the tolerance bounds rel_mse (the rule's
    premises); else ``verdict`` as it is. The reason names the rule, the float64 norm, the scale
    and the bound."""
    golden, values = _flat(summed.golden), _flat(actual)
    if not zero_sum_applies(tolerance) or not summed.scale > 0 or values.shape != golden.shape:
        return verdict
    golden_norm = float(np.linalg.norm(golden))
    if golden_norm > tolerance.bound * summed.scale or not np.isfinite(values).all():
        return verdict  # a sum the terms resolve, or a non-finite value the plain verdict names
    value = float(np.linalg.norm(values - golden)) / summed.scale
    roundoff = (summed.terms - 1) * UNIT_ROUNDOFF.get(dtype or "float32", UNIT_ROUNDOFF["float32"])
    bound = tolerance.bound + roundoff
    passed = value <= bound
    reason = (f"the sum cancels: the float64 gradient's norm {golden_norm:.3g} <= bound x scale "
              f"{tolerance.bound * summed.scale:.3g} (scale {summed.scale:.4g} = sqrt({summed.terms} summands) x the "
              f"summed gradient's norm), so rel_mse against the CPU's float32 value judges rounding "
              f"({verdict.reason}); {ZERO_SUM_METRIC} |actual - float64| / scale {value:.4g} "
              f"{'<=' if passed else '>'} bound {tolerance.bound:g} + {summed.terms - 1} x u = {bound:.4g} "
              f"({tolerance.source})")
    diagnostics = {**verdict.diagnostics, "zero_sum_scale": summed.scale, "zero_sum_terms": float(summed.terms),
                   "float64_norm": golden_norm}
    return replace(verdict, passed=passed, metric=ZERO_SUM_METRIC, value=value, bound=bound,
                   headroom=math.inf if value == 0 else bound / value, reason=reason, diagnostics=diagnostics,
                   worst=verdict.worst if not passed else (), eps_zeroed=False)
