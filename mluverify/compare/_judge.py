"""The judge: walk nested outputs, judge each leaf against its tolerance, build one verdict.

Failures are data (a Verdict with a reason) until the top; only ``assert_close`` raises.
Integer and bool leaves are judged bit-exact whatever the mode.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from mluverify.compare._metrics import all_metrics
from mluverify.errors import InvalidArgument
from mluverify.compare._tolerance import EXACT, Tolerance, ToleranceTable, policy, resolve_tolerance

WORST_ELEMENTS = 5


@dataclass(frozen=True)
class Verdict:
    """The judgement of one comparison.

    ``value`` is the judged metric (for ``exact``: the number of differing elements);
    ``headroom`` is ``bound / value`` (inf when the value is 0). ``leaf`` names the output
    element that decided the verdict (``""`` for a single tensor, else e.g. ``[0]['out']``).
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


def _judge_leaf(actual: _Leaf, expected: _Leaf, tolerance: Tolerance, path: str,
                extra: Mapping[str, Callable[[np.ndarray, np.ndarray], float]]) -> Verdict:
    if actual.shape != expected.shape:
        return _failed(tolerance, f"shape mismatch: actual {list(actual.shape)} vs expected {list(expected.shape)}", path)
    if actual.dtype != expected.dtype:
        return _failed(tolerance, f"dtype mismatch: actual {actual.dtype} vs expected {expected.dtype}", path)
    if expected.exact or tolerance.metric == EXACT:
        return _judge_exact(actual, expected, path)
    a, e = actual.values.reshape(-1), expected.values.reshape(-1)
    a, e, nan_mismatch = _mask_non_finite(a, e)
    if nan_mismatch:
        return _failed(tolerance, f"{nan_mismatch} NaN/Inf position(s) differ between actual and expected",
                       path, nan_mismatch)
    diagnostics = all_metrics(a, e)
    if extra:  # plugin metrics get float64 arrays, as documented
        a, e = a.astype(np.float64, copy=False), e.astype(np.float64, copy=False)
        diagnostics.update({name: float(fn(a, e)) for name, fn in extra.items()})
    value = diagnostics[tolerance.metric]
    passed = value <= tolerance.bound
    verb = "<=" if passed else ">"
    reason = f"{tolerance.metric} {value:.4g} {verb} bound {tolerance.bound:g} ({tolerance.source})"
    worst = () if passed else _worst_elements(actual.values, expected.values)
    return Verdict(passed, tolerance.metric, value, tolerance.bound, _headroom(tolerance.bound, value),
                   reason, diagnostics, 0, path, worst, tolerance.source)


def _mask_non_finite(a: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop positions where both are the same non-finite value; count positions that differ."""
    finite_a, finite_e = np.isfinite(a), np.isfinite(e)
    if finite_a.all() and finite_e.all():
        return a, e, 0
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = ~finite_a & ~finite_e & (a == e)
    same_non_finite = both_nan | same_inf
    mismatch = int(((~finite_a | ~finite_e) & ~same_non_finite).sum())
    keep = finite_a & finite_e
    return a[keep], e[keep], mismatch


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
) -> Verdict:
    """Judge ``actual`` (device) against ``expected`` (CPU reference) by the policy of ``mode``.

    Accepts tensors, numpy arrays, numbers and nested tuples / lists / dicts / namedtuples
    of them. ``tolerance`` overrides the policy (a number bounds the policy's metric);
    ``tolerances`` is a ``[tool.mluverify.tolerances]`` table consulted by op, dtype, mode.
    Never raises for a mismatch: shape, dtype, structure and NaN/Inf differences are failed
    verdicts naming what differs.
    """
    resolved = resolve_tolerance(op=op, dtype=dtype, mode=mode, policy_name=mode,
                                 marker=tolerance, table=tolerances)
    verdicts = [_judge_item(item, resolved, extra_metrics or {}) for item in _walk(actual, expected)]
    if not verdicts:
        return Verdict(True, resolved.metric, 0.0, resolved.bound, math.inf, "nothing to compare",
                       tolerance_source=resolved.source)
    return min(verdicts, key=_severity) if len(verdicts) > 1 else verdicts[0]


def _judge_item(item: tuple, tolerance: Tolerance, extra) -> Verdict:
    if len(item) == 2:
        path, reason = item
        return _failed(tolerance, reason, path)
    path, actual, expected = item
    try:
        actual_leaf, expected_leaf = _as_leaf(actual), _as_leaf(expected)
    except _Unsupported as exc:
        if actual == expected:
            return Verdict(True, EXACT, 0.0, 0.0, math.inf, "equal", leaf=path)
        return _failed(tolerance, f"{exc}: actual {actual!r} vs expected {expected!r}", path)
    return _judge_leaf(actual_leaf, expected_leaf, tolerance, path, extra)


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
    a, e, _ = _mask_non_finite(a, e)
    return all_metrics(a, e)
