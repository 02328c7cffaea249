"""The judge: walk nested outputs, judge each leaf against its tolerance, build one verdict.

Failures are data (a Verdict with a reason) until the top; only ``assert_close`` raises.
Integer and bool leaves are judged bit-exact whatever the mode.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from mluverify.judge._metrics import (
    BUILTIN_METRICS,
    ULP_DTYPES,
    ULP_METRICS,
    PairSums,
    all_metrics,
    pair_sums,
    ulp_metrics,
)
from mluverify.judge._tolerance import (
    EXACT,
    GOLDEN_RULES,
    POLICIES,
    GoldenRule,
    Tolerance,
    ToleranceTable,
    policy,
    resolve_tolerance,
)
from mluverify.errors import InvalidArgument

WORST_ELEMENTS = 5
# Positions named when NaN/Inf positions differ.
NON_FINITE_SHOWN = 5
# Absolute error a result may have where the reference is (nearly) all zeros: below the eps
# floor rel_mse says nothing, so max_abs is judged as well, against bound * max|e| plus this.
# msprobe's small-value absolute thresholds (float32 2^-30, float16 / bfloat16 2^-16).
SMALL_VALUE_ATOL: Mapping[str, float] = {"float64": 2.0**-30, "float32": 2.0**-30,
                                          "float16": 2.0**-16, "bfloat16": 2.0**-16}


@dataclass(frozen=True)
class Verdict:
    """The judgement of one comparison.

    ``value`` is the judged metric (for ``exact``: the number of differing elements);
    ``headroom`` is ``bound / value`` (inf when the value is 0). ``leaf`` names the output
    element that decided the verdict (``""`` for a single tensor, else e.g. ``[0]['out']``).
    With a golden (float64) result, ``device_error`` and ``reference_error`` are the device's
    and the CPU reference's errors against it in the judged metric. ``nothing_compared``: every
    element was NaN/Inf on both sides, so no value was judged. ``eps_zeroed``: the judged
    value is a rel_mse that Cambricon's eps rule turned to 0 though the raw error is not
    (``diagnostics["raw_rel_mse"]`` holds the raw value; ``ulp_max`` / ``ulp_p99`` are there
    when a golden result exists). ``tolerance``: the case's resolved tolerance (marker, hook,
    config or policy), which ``metric`` / ``bound`` may differ from (a ULP tolerance without a
    golden result, the small-value check, the golden rule's bound for one comparison).
    """

    passed: bool
    metric: str
    value: float
    bound: float
    headroom: float
    reason: str
    diagnostics: Mapping[str, float] = field(default_factory=dict)
    nan_mismatch: int = 0
    leaf: str = ""
    worst: tuple[tuple[tuple[int, ...], float, float], ...] = ()
    tolerance_source: str = ""
    device_error: float | None = None
    reference_error: float | None = None
    nothing_compared: bool = False
    eps_zeroed: bool = False
    tolerance: Tolerance | None = None

    @property
    def message(self) -> str:
        """The multi-line explanation shown when the verdict fails."""
        return _message(self)


class _Unsupported(Exception):
    """A value this judge cannot compare as a leaf."""


@dataclass(frozen=True)
class _Leaf:
    values: np.ndarray  # floats in their own precision (widened where measured); exact: as is
    shape: tuple[int, ...]
    dtype: str
    exact: bool


def _as_leaf(value: Any) -> _Leaf:
    if isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        return _leaf_from_numpy(value, str(value.dtype))
    torch = _torch_if_loaded()
    if torch is not None and isinstance(value, torch.Tensor):
        return _leaf_from_tensor(torch, value)
    raise _Unsupported(f"cannot compare a {type(value).__name__}")


def _torch_if_loaded():
    import sys

    return sys.modules.get("torch")


def _leaf_from_tensor(torch, tensor) -> _Leaf:
    dtype = str(tensor.dtype).replace("torch.", "")
    tensor = tensor.detach().cpu()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()
    return _leaf_from_numpy(tensor.resolve_conj().resolve_neg().numpy(), dtype, tuple(tensor.shape))


def _leaf_from_numpy(array: np.ndarray, dtype: str, shape: tuple[int, ...] | None = None) -> _Leaf:
    exact = array.dtype.kind in "biu"
    if array.dtype.kind == "c":
        array = np.stack([array.real, array.imag], axis=-1)
    return _Leaf(array, tuple(array.shape) if shape is None else shape, dtype, exact)


def _walk(actual: Any, expected: Any, path: str = "") -> Iterator[tuple[str, Any, Any] | tuple[str, str]]:
    """Yield ``(path, actual_leaf, expected_leaf)`` or ``(path, structural_mismatch_reason)``."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or set(actual) != set(expected):
            yield path, f"structure differs: actual {_describe(actual)} vs expected {_describe(expected)}"
            return
        for key in expected:
            yield from _walk(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, Sequence) and not isinstance(expected, (str, bytes)):
        if not isinstance(actual, Sequence) or len(actual) != len(expected):
            yield path, f"structure differs: actual {_describe(actual)} vs expected {_describe(expected)}"
            return
        for index, (a, e) in enumerate(zip(actual, expected)):
            yield from _walk(a, e, f"{path}[{index}]")
    else:
        yield path, actual, expected


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"{type(value).__name__} with keys {sorted(map(str, value))}"
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


def _failed(tolerance: Tolerance, reason: str, path: str, nan_mismatch: int = 0) -> Verdict:
    return Verdict(False, tolerance.metric, math.nan, tolerance.bound, 0.0, reason,
                   nan_mismatch=nan_mismatch, leaf=path, tolerance_source=tolerance.source)


def _headroom(bound: float, value: float) -> float:
    if value == 0:
        return math.inf
    return bound / value


@dataclass(frozen=True)
class _Context:
    """What every leaf of one comparison is judged with."""

    tolerance: Tolerance
    dtype: str
    golden_rules: Mapping[str, GoldenRule]
    expect_non_finite: bool
    extra: Mapping[str, Callable[[np.ndarray, np.ndarray], float]]
    mode: str = "cnnl"


def _judge_leaf(actual: _Leaf, expected: _Leaf, golden: _Leaf | None, path: str, context: _Context) -> Verdict:
    tolerance = context.tolerance
    if actual.shape != expected.shape:
        return _failed(tolerance, f"shape mismatch: actual {list(actual.shape)} vs expected {list(expected.shape)}", path)
    if actual.dtype != expected.dtype:
        return _failed(tolerance, f"dtype mismatch: actual {actual.dtype} vs expected {expected.dtype}", path)
    dtype = context.dtype or expected.dtype
    note = ""
    if tolerance.metric in ULP_METRICS and (golden is None or dtype not in ULP_DTYPES):
        tolerance, note = _without_golden(tolerance, context.mode)
    if expected.exact or tolerance.metric == EXACT:
        verdict = _judge_exact(actual, expected, path)
        return replace(verdict, reason=note + verdict.reason) if note else verdict
    a, e = actual.values.reshape(-1), expected.values.reshape(-1)
    keep, mismatch = _finite_positions(a, e)
    if mismatch.any():
        return _failed(tolerance, _non_finite_reason(actual.values, expected.values, mismatch), path,
                       int(mismatch.sum()))
    if keep is not None:
        a, e = a[keep], e[keep]
    if a.size == 0 and expected.values.size > 0:
        return _nothing_compared(tolerance, expected.values.size, path, context.expect_non_finite)
    sums = pair_sums(a, e)
    diagnostics = sums.metrics() | {"raw_rel_mse": sums.raw_rel_mse}
    if context.extra:  # plugin metrics get float64 arrays, as documented
        a64, e64 = a.astype(np.float64, copy=False), e.astype(np.float64, copy=False)
        diagnostics.update({name: float(fn(a64, e64)) for name, fn in context.extra.items()})
    if golden is not None and dtype in ULP_DTYPES:
        diagnostics.update(ulp_metrics(a, _golden_values(golden, keep), dtype))
    errors = _golden_errors(a, e, golden, keep, tolerance.metric)
    if tolerance.golden:
        rule = context.golden_rules.get(dtype, GOLDEN_RULES["float32"])
        metric, value, bound, reason = _golden_judgement(errors, rule, a.size, tolerance)
    else:
        metric, value, bound = tolerance.metric, diagnostics[tolerance.metric], tolerance.bound
        reason = _bound_reason(metric, value, bound, tolerance.source, sums)
        if metric == "rel_mse" and sums.eps_rules_decide(bound):
            metric, value, bound, reason = _second_check(sums, diagnostics, tolerance, context, reason)
    passed = value <= bound
    worst = () if passed else _worst_elements(actual.values, expected.values)
    return Verdict(passed, metric, value, bound, _headroom(bound, value), note + reason, diagnostics, 0, path,
                   worst, tolerance.source, *errors, eps_zeroed=metric == "rel_mse" and sums.eps_zeroed)


def _bound_reason(metric: str, value: float, bound: float, source: str, sums: PairSums) -> str:
    """``metric value <= bound (source)``; a rel_mse the eps rule zeroed shows its raw value."""
    shown = f"{value:.4g}"
    if metric == "rel_mse" and sums.eps_zeroed:
        shown += (f" (raw {sums.raw_rel_mse:.3g}, zeroed by the eps rule: total squared error "
                  f"{sums.squared_error:.3g} <= (2 eps)^2)")
    return f"{metric} {shown} {'<=' if value <= bound else '>'} bound {bound:g} ({source})"


def _without_golden(tolerance: Tolerance, mode: str) -> tuple[Tolerance, str]:
    """A ULP tolerance needs a golden result in a float dtype; without one the mode's policy
    judges, and the reason says so (``policy:<mode>``; ``policy:cnnl`` for a mode without one)."""
    fallback = policy(mode if mode in POLICIES else "cnnl")
    return fallback, (f"{tolerance.metric} needs a golden (float64) result and this case has none, "
                      f"so {fallback.source} judged it: ")


def _golden_values(golden: _Leaf, keep: np.ndarray | None) -> np.ndarray:
    """The golden leaf's values at the positions compared (``keep``: None for all)."""
    g = golden.values.reshape(-1)
    return g if keep is None else g[keep]


def _nothing_compared(tolerance: Tolerance, size: int, path: str, expected: bool) -> Verdict:
    """Every element NaN/Inf on both sides at the same positions: no value was judged."""
    reason = (f"nothing compared: all {size} elements are NaN/Inf on both sides (same positions); "
              + ("the case expects that" if expected else "no value was judged (pass expect_non_finite=True "
                 "if the case expects it)"))
    return Verdict(expected, tolerance.metric, 0.0 if expected else math.nan, tolerance.bound,
                   math.inf if expected else 0.0, reason, leaf=path, tolerance_source=tolerance.source,
                   nothing_compared=True)


def _second_check(sums, diagnostics: Mapping[str, float], tolerance: Tolerance, context: _Context,
                  reason: str) -> tuple[str, float, float, str]:
    """Below the eps floor rel_mse is decided by the eps rules, not the data: judge max_abs too,
    against ``bound * max|e| + SMALL_VALUE_ATOL[dtype]``; the verdict says which decided."""
    atol = SMALL_VALUE_ATOL.get(context.dtype, SMALL_VALUE_ATOL["float32"])
    abs_bound = tolerance.bound * sums.max_abs_e + atol
    floor_note = (f"Cambricon's eps floor decides rel_mse (reference energy sum(e^2) = "
                  f"{sums.squared_reference:.3g}, squared error {sums.squared_error:.3g}), so it is not informative")
    max_abs = diagnostics["max_abs"]
    if max_abs > abs_bound:
        return ("max_abs", max_abs, abs_bound,
                f"{floor_note}; max_abs {max_abs:.4g} > {abs_bound:.3g} (bound x max|e| + {atol:.3g})")
    rel = diagnostics["rel_mse"]
    return ("rel_mse", rel, tolerance.bound,
            f"{reason}; {floor_note}: max_abs {max_abs:.4g} <= {abs_bound:.3g} also checked")


def _golden_errors(a: np.ndarray, e: np.ndarray, golden: _Leaf | None, keep, metric: str
                   ) -> tuple[float | None, float | None]:
    """(device error, reference error) against the golden result in ``metric``, or (None, None)."""
    if golden is None or metric not in BUILTIN_METRICS:
        return None, None
    g = _golden_values(golden, keep).astype(np.float64, copy=False)
    finite = np.isfinite(g)
    if not finite.all():
        a, e, g = a[finite], e[finite], g[finite]
    measure = BUILTIN_METRICS[metric]
    return float(measure(a.astype(np.float64), g)), float(measure(e.astype(np.float64), g))


def _golden_judgement(errors, rule: GoldenRule, size: int, tolerance: Tolerance
                      ) -> tuple[str, float, float, str]:
    device_error, reference_error = errors
    if device_error is None:
        return tolerance.metric, math.nan, 0.0, "golden policy without a golden (float64) result"
    bound = rule.bound(reference_error, size)
    verb = "<=" if device_error <= bound else ">"
    return (tolerance.metric, device_error, bound,
            f"golden: device {tolerance.metric} {device_error:.4g} {verb} k x reference {reference_error:.4g} "
            f"+ floor = {bound:.4g} (k = {rule.multiplier(size):g}, floor = {rule.floor:.3g}; {tolerance.source})")


def _finite_positions(a: np.ndarray, e: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(positions finite on both sides, or None when all are; positions whose non-finite values
    differ between the sides). Equal NaN/Inf on both sides is excluded, not a mismatch."""
    finite_a, finite_e = np.isfinite(a), np.isfinite(e)
    if finite_a.all() and finite_e.all():
        return None, np.zeros(0, dtype=bool)
    same_non_finite = (np.isnan(a) & np.isnan(e)) | (~finite_a & ~finite_e & (a == e))
    return finite_a & finite_e, (~finite_a | ~finite_e) & ~same_non_finite


def _non_finite_reason(actual: np.ndarray, expected: np.ndarray, mismatch: np.ndarray) -> str:
    """How many NaN/Inf positions differ, and the first few: index, both values, which side."""
    count = int(mismatch.sum())
    shown = []
    for flat in np.flatnonzero(mismatch)[:NON_FINITE_SHOWN]:
        index = tuple(int(i) for i in np.unravel_index(flat, actual.shape))
        a, e = float(actual.reshape(-1)[flat]), float(expected.reshape(-1)[flat])
        side = "both" if not (math.isfinite(a) or math.isfinite(e)) else ("actual" if not math.isfinite(a) else "expected")
        shown.append(f"{index}: actual {a:g} vs expected {e:g} ({side} non-finite)")
    more = f", ... ({count - len(shown)} more)" if count > len(shown) else ""
    return f"{count} NaN/Inf position(s) differ between actual and expected: " + "; ".join(shown) + more


def _judge_exact(actual: _Leaf, expected: _Leaf, path: str) -> Verdict:
    a, e = actual.values, expected.values
    differ = a != e
    if a.dtype.kind == "f":  # float leaves judged exactly: equal NaNs count as equal
        differ &= ~(np.isnan(a) & np.isnan(e))
    count = int(differ.sum())
    tolerance = policy(EXACT)
    if count == 0:
        return Verdict(True, EXACT, 0.0, 0.0, math.inf, "bit-exact", leaf=path, tolerance_source=tolerance.source)
    worst = tuple(
        (tuple(int(i) for i in index), float(a[tuple(index)]), float(e[tuple(index)]))
        for index in np.argwhere(differ)[:WORST_ELEMENTS]
    )
    reason = f"{count} / {e.size} elements differ ({100 * count / max(e.size, 1):.1f}%), must be bit-exact"
    return Verdict(False, EXACT, float(count), 0.0, 0.0, reason, leaf=path, worst=worst,
                   tolerance_source=tolerance.source)


def _worst_elements(actual: np.ndarray, expected: np.ndarray):
    actual, expected = actual.astype(np.float64), expected.astype(np.float64)  # no overflow
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, ranked worst just below
        abs_diff = np.abs(actual - expected).reshape(-1)
    abs_diff = np.where(np.isnan(abs_diff), np.inf, abs_diff)
    count = min(WORST_ELEMENTS, abs_diff.size)
    flat = np.argpartition(-abs_diff, count - 1)[:count] if count else []
    flat = sorted(flat, key=lambda i: -abs_diff[i])
    return tuple(
        (tuple(int(i) for i in np.unravel_index(i, actual.shape)),
         float(actual.reshape(-1)[i]), float(expected.reshape(-1)[i]))
        for i in flat
    )


def _severity(verdict: Verdict) -> tuple[int, float]:
    """Orders verdicts worst first: failures, then the smallest headroom."""
    return (0 if not verdict.passed else 1, verdict.headroom)


def compare(
    actual: Any,
    expected: Any,
    *,
    mode: str = "cnnl",
    op: str = "",
    dtype: str = "",
    tolerance: Tolerance | float | None = None,
    tolerances: ToleranceTable | None = None,
    extra_metrics: Mapping[str, Callable[[np.ndarray, np.ndarray], float]] | None = None,
    golden: Any = None,
    golden_rules: Mapping[str, GoldenRule] | None = None,
    expect_non_finite: bool = False,
) -> Verdict:
    """Judge ``actual`` (device) against ``expected`` (CPU reference) by the policy of ``mode``.

    Accepts tensors, numpy arrays, numbers and nested tuples / lists / dicts / namedtuples
    of them. ``tolerance`` overrides the policy (a number bounds the policy's metric; a
    ``Tolerance``, e.g. one ``resolve_tolerance`` gave, judges as it is);
    ``tolerances`` is a ``[tool.mluverify.tolerances]`` table consulted by op, dtype, mode.
    ``golden``: the same computation in float64 (same structure); the verdict then holds the
    device's and the reference's errors against it, and the ``golden`` policy judges by them
    (``golden_rules``: per-dtype k and floor, default ``GOLDEN_RULES``); floating leaves also get
    ``ulp_max`` / ``ulp_p99`` in ``dtype`` in their diagnostics, which a tolerance may bound
    (without a golden result the mode's policy judges instead, as the reason says). ``dtype``: the
    precision the device computed in (default: the leaves' dtype). ``expect_non_finite``:
    outputs that are NaN/Inf everywhere (on both sides) pass; otherwise "nothing compared" fails.
    Never raises for a mismatch: shape, dtype, structure and NaN/Inf differences are failed
    verdicts naming what differs.
    """
    resolved = tolerance if isinstance(tolerance, Tolerance) else resolve_tolerance(
        op=op, dtype=dtype, mode=mode, policy_name=mode, marker=tolerance, table=tolerances)
    context = _Context(resolved, dtype, golden_rules or GOLDEN_RULES, expect_non_finite, extra_metrics or {}, mode)
    golden_leaves = {} if golden is None else {item[0]: item[1] for item in _walk(golden, expected) if len(item) == 3}
    verdicts = [_judge_item(item, golden_leaves, context) for item in _walk(actual, expected)]
    if not verdicts:
        return Verdict(True, resolved.metric, 0.0, resolved.bound, math.inf, "nothing to compare: empty output",
                       tolerance_source=resolved.source, tolerance=resolved)
    return replace(min(verdicts, key=_severity), tolerance=resolved)


def _judge_item(item: tuple, golden_leaves: Mapping[str, Any], context: _Context) -> Verdict:
    if len(item) == 2:
        path, reason = item
        return _failed(context.tolerance, reason, path)
    path, actual, expected = item
    try:
        actual_leaf, expected_leaf = _as_leaf(actual), _as_leaf(expected)
    except _Unsupported as exc:
        if actual == expected:
            return Verdict(True, EXACT, 0.0, 0.0, math.inf, "equal", leaf=path)
        return _failed(context.tolerance, f"{exc}: actual {actual!r} vs expected {expected!r}", path)
    golden = _golden_leaf(golden_leaves.get(path), expected_leaf)
    return _judge_leaf(actual_leaf, expected_leaf, golden, path, context)


def _golden_leaf(value: Any, expected: _Leaf) -> _Leaf | None:
    """The golden leaf for one output, when it is a floating leaf of the expected shape."""
    if value is None:
        return None
    try:
        leaf = _as_leaf(value)
    except _Unsupported:
        return None
    return leaf if leaf.shape == expected.shape and not leaf.exact else None


def assert_close(actual: Any, expected: Any, *, msg: str | None = None, **kwargs: Any) -> Verdict:
    """Like ``compare``, but raise AssertionError showing metric, bound, headroom and the worst
    elements with their indices when the verdict fails. Returns the verdict when it passes."""
    __tracebackhide__ = True
    verdict = compare(actual, expected, **kwargs)
    if not verdict.passed:
        raise AssertionError(verdict.message if msg is None else f"{msg}\n{verdict.message}") from None
    return verdict


def _message(verdict: Verdict) -> str:
    where = f" at output {verdict.leaf}" if verdict.leaf else ""
    lines = [f"Mismatch{where}: {verdict.reason}"]
    if verdict.diagnostics:
        lines.append(f"Headroom: {verdict.headroom:.3g} (bound / value; < 1 fails)")
        lines.append("Metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in verdict.diagnostics.items()))
    if verdict.device_error is not None:
        lines.append(f"Against float64: device {verdict.device_error:.4g}, CPU reference "
                     f"{verdict.reference_error:.4g} ({verdict.metric})")
    if verdict.worst:
        lines.append("Worst elements (index: actual vs expected, |difference|):")
        for index, a, e in verdict.worst:
            lines.append(f"  {index}: {a:.6g} vs {e:.6g}, {abs(a - e):.3g}")
    return "\n".join(lines)


def pair_metrics(actual: Any, expected: Any) -> dict[str, float]:
    """All built-in metrics of one leaf pair as float64, non-finite positions excluded."""
    actual_leaf, expected_leaf = _as_leaf(actual), _as_leaf(expected)
    if actual_leaf.shape != expected_leaf.shape:
        raise InvalidArgument(
            f"metrics need equal shapes: actual {list(actual_leaf.shape)} vs expected {list(expected_leaf.shape)}"
        )
    a, e = actual_leaf.values.reshape(-1), expected_leaf.values.reshape(-1)
    keep, _ = _finite_positions(a, e)
    return all_metrics(a, e) if keep is None else all_metrics(a[keep], e[keep])
