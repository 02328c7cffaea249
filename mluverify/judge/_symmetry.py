"""The zero-sum rule: a gradient that is exactly 0 by symmetry, judged against the truth.

A bias's gradient is its layer's output gradient ``g`` summed over the ``terms`` positions the
bias is added at. Where the layer's outputs enter only through a softmax that is unchanged by a
shift (an attention key bias adds ``q.b`` to every key's score), those sums are exactly 0: the
float64 gradient is float64 rounding, the CPU's float32 one float32 rounding, and a relative
error against either judges noise by noise. Instead, such a gradient (its float64 norm at most
``ZERO_BY_SYMMETRY`` x ``scale``) is judged by how far the device's sum may be from the true one
when the device's ``g`` is within the case's bound: with ``e`` the error of ``g`` and
``||e|| <= bound ||g||`` (the rel_mse bound every tensor of the mode is held to), Cauchy-Schwarz
over each bias element's ``terms`` summands gives

    ||sum(e)|| <= sqrt(terms) ||e|| <= bound * scale,   scale = sqrt(terms) ||g||

and summing ``terms`` values in the case's dtype adds at most ``(terms - 1) u`` relative to the
same scale (``u`` the dtype's unit roundoff). The judged value is ``||actual - golden|| / scale``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from mluverify.judge._judge import Verdict, _as_leaf
from mluverify.judge._tolerance import Tolerance

# Below float32's unit roundoff relative to its summands, a float32 gradient carries no digit of
# the sum: the CPU's reference is its own rounding, not the value.
ZERO_BY_SYMMETRY = 2.0**-24
# Unit roundoff of the dtype the device sums in (the judged metric's second term).
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


def judge_zero_sum(verdict: Verdict, actual: Any, summed: TermSum, tolerance: Tolerance, dtype: str) -> Verdict:
    """``verdict`` (the plain comparison with the CPU) replaced by the zero-sum rule when the
    float64 gradient is 0 by symmetry and the tolerance bounds rel_mse (the rule's premise); else
    ``verdict`` as it is. The reason names the rule, the float64 norm, the scale and the bound."""
    golden = _as_leaf(summed.golden).values.astype(np.float64).reshape(-1)
    golden_norm = float(np.linalg.norm(golden))
    if not zero_sum_applies(tolerance) or not summed.scale > 0 or golden_norm > ZERO_BY_SYMMETRY * summed.scale:
        return verdict
    values = _as_leaf(actual).values.astype(np.float64).reshape(-1)
    if values.shape != golden.shape or not np.isfinite(values).all():
        return verdict  # the plain comparison already says what is wrong with it
    value = float(np.linalg.norm(values - golden)) / summed.scale
    roundoff = (summed.terms - 1) * UNIT_ROUNDOFF.get(dtype or "float32", UNIT_ROUNDOFF["float32"])
    bound = tolerance.bound + roundoff
    passed = value <= bound
    reason = (f"zero by symmetry: the float64 gradient's norm {golden_norm:.3g} <= 2^-24 x scale {summed.scale:.4g} "
              f"(sqrt({summed.terms} summands) x the summed gradient's norm), so the CPU's float32 value is rounding "
              f"noise ({verdict.reason}); {ZERO_SUM_METRIC} |actual - float64| / scale {value:.4g} "
              f"{'<=' if passed else '>'} bound {tolerance.bound:g} + {summed.terms - 1} x u = {bound:.4g} "
              f"({tolerance.source})")
    diagnostics = {**verdict.diagnostics, "zero_sum_scale": summed.scale, "zero_sum_terms": float(summed.terms),
                   "float64_norm": golden_norm}
    return replace(verdict, passed=passed, metric=ZERO_SUM_METRIC, value=value, bound=bound,
                   headroom=math.inf if value == 0 else bound / value, reason=reason, diagnostics=diagnostics,
                   worst=verdict.worst if not passed else (), eps_zeroed=False)
