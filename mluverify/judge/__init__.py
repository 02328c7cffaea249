"""The judge: metrics, tolerance policies and verdicts. Knows no device."""
from __future__ import annotations

from typing import Any

from mluverify.judge._judge import Verdict, assert_close, compare, pair_metrics
from mluverify.judge._symmetry import ZERO_SUM_METRIC, TermSum, judge_zero_sum, zero_sum_applies
from mluverify.judge._metrics import (
    BUILTIN_METRICS,
    DIAGNOSTIC,
    EPS,
    JUDGEABLE,
    METRIC_NAMES,
    PAIR_JUDGEABLE,
    RAW_AND_ULP_METRICS,
    ULP_METRICS,
    cosine,
    max_abs,
    max_rel,
    rae,
    raw_rel_mse_from_sqnr_db,
    rel_mse,
    rma,
    sqnr_db,
    ulp_metrics,
)
from mluverify.judge._tolerance import (
    EXACT,
    GOLDEN,
    GOLDEN_RULES,
    POLICIES,
    GoldenRule,
    Tolerance,
    ToleranceTable,
    parse_golden_rules,
    policy,
    resolve_tolerance,
)
from mluverify.judge._task import (
    DEFAULT_EFFECT_SHARE,
    TASK_METRICS,
    TaskBudget,
    TaskThreshold,
    binomial_cdf,
    required_samples,
    task_threshold,
)

__all__ = [
    "BUILTIN_METRICS", "DIAGNOSTIC", "EPS", "EXACT", "GOLDEN", "GOLDEN_RULES", "GoldenRule", "JUDGEABLE", "METRIC_NAMES",
    "PAIR_JUDGEABLE", "POLICIES", "RAW_AND_ULP_METRICS", "Tolerance", "ToleranceTable", "Verdict", "assert_close", "compare", "cosine", "max_abs",
    "max_rel", "metrics", "parse_golden_rules", "policy", "rae", "raw_rel_mse_from_sqnr_db", "rel_mse", "resolve_tolerance", "rma",
    "sqnr_db", "ULP_METRICS", "ulp_metrics",
    "DEFAULT_EFFECT_SHARE", "TASK_METRICS", "TaskBudget", "TaskThreshold", "binomial_cdf", "required_samples",
    "task_threshold", "TermSum", "ZERO_SUM_METRIC", "judge_zero_sum", "zero_sum_applies",
]


def metrics(actual: Any, expected: Any) -> dict[str, float]:
    """Every built-in metric of one tensor / array pair, in float64, whatever the two dtypes.

    Positions where either side is NaN/Inf are excluded. A quick diagnostic for tools (dump
    diff, quantization layer errors); a judgement with NaN/Inf, shape and dtype checks is
    ``compare``. Shapes must match (InvalidArgument otherwise).
    """
    return pair_metrics(actual, expected)
