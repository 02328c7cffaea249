"""Error metrics, each ``f(actual, expected) -> float`` on float64 arrays with ``expected`` the
CPU reference. Definitions follow Cambricon's ``assertTensorsEqual`` (rel_mse, rae, rma, max_abs)
and msprobe / torch.ao.ns (max_rel, cosine, sqnr_db); the README's "The judge" has the table.

All metrics of one pair are computed together (``all_metrics``) so the float64 copies and
the shared sums are made once, in cache-sized chunks; the single-metric functions are for
users and tests. ULP metrics (``ulp_metrics``) compare a result with its golden float64 result
instead of the CPU reference, in units of the case's dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from mluverify.errors import InvalidArgument, valid_choice

# Cambricon's epsilon: a total squared error at most (2 eps)^2 counts as no error, and a
# reference whose squared sum is at most eps gets eps added, so near-zero references do not
# turn rounding noise into huge relative errors.
EPS = 1.0 / 16384

# ULP error against the golden (float64) result: a libm-style accuracy measure in the case's
# dtype. A correctly rounded result is at most 0.5 ULP off, so no bound may be below that.
ULP_METRICS = ("ulp_max", "ulp_p99")
CORRECTLY_ROUNDED_ULP = 0.5

# The metrics of one (actual, reference) pair; lower is better for the first five.
PAIR_JUDGEABLE = ("rel_mse", "rae", "rma", "max_abs", "max_rel")
DIAGNOSTIC = ("cosine", "sqnr_db")
METRIC_NAMES = PAIR_JUDGEABLE + DIAGNOSTIC
# Metrics a tolerance may bound: the pair's, and the ULP metrics (which need a golden result).
JUDGEABLE = PAIR_JUDGEABLE + ULP_METRICS
# Diagnostics a verdict adds to the pair's metrics: the raw rel_mse, and the ULPs with a golden result.
RAW_AND_ULP_METRICS = ("raw_rel_mse",) + ULP_METRICS


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """``sum(x * y)`` without BLAS: a multithreaded BLAS dot leaves OpenBLAS's workers
    spinning, and torch's OpenMP pool then waits for cores: on 2 cores the next torch sum of
    800 k floats takes milliseconds instead of tens of microseconds (benchmarks/compare_cost.py
    prints both). einsum is one thread."""
    return float(np.einsum("i,i->", x, y))


def _ratio_or_exact(numerator: float, denominator: float) -> float:
    """numerator / denominator; with a zero reference, 0 when the actual is exact too, else inf."""
    if denominator == 0:
        return 0.0 if numerator == 0 else math.inf
    return numerator / denominator


def rel_mse(actual: np.ndarray, expected: np.ndarray) -> float:
    """``sqrt(sum((a-e)^2) / sum(e^2))`` with Cambricon's eps rules (the 2 % / 0.3 % metric)."""
    diff = actual - expected
    return _rel_mse_from_sums(_dot(diff, diff), _dot(expected, expected))


def _rel_mse_from_sums(squared_error: float, squared_reference: float) -> float:
    if squared_error <= (2 * EPS) ** 2:
        squared_error = 0.0
    if squared_reference <= EPS:
        squared_reference += EPS
    return math.sqrt(squared_error / squared_reference)


def rae(actual: np.ndarray, expected: np.ndarray) -> float:
    """Relative absolute error ``sum|a-e| / sum|e|``; a zero reference demands exact equality."""
    return _ratio_or_exact(float(np.abs(actual - expected).sum()), float(np.abs(expected).sum()))


def rma(actual: np.ndarray, expected: np.ndarray) -> float:
    """Relative mean-absolute difference ``| mean|e| - mean|a| | / mean|e|``."""
    if actual.size == 0:
        return 0.0
    mean_abs_e = float(np.abs(expected).mean())
    mean_abs_a = float(np.abs(actual).mean())
    return _ratio_or_exact(abs(mean_abs_e - mean_abs_a), mean_abs_e)


def max_abs(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest absolute difference."""
    return float(np.abs(actual - expected).max()) if actual.size else 0.0


def max_rel(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest ``|a-e| / |e|`` over elements whose reference is non-zero."""
    abs_e = np.abs(expected)
    return _max_rel(np.abs(actual - expected), abs_e)


def _max_rel(abs_diff: np.ndarray, abs_e: np.ndarray) -> float:
    nonzero = abs_e > 0
    if not nonzero.any():
        return 0.0
    return float((abs_diff[nonzero] / abs_e[nonzero]).max())


def cosine(actual: np.ndarray, expected: np.ndarray) -> float:
    """Cosine similarity; 1 when both are all zero, 0 when only one is."""
    return _cosine(_dot(actual, expected), _dot(actual, actual), _dot(expected, expected))


def _cosine(dot: float, squared_a: float, squared_e: float) -> float:
    if squared_a == 0 or squared_e == 0:
        return 1.0 if squared_a == squared_e else 0.0
    return dot / math.sqrt(squared_a * squared_e)


def sqnr_db(actual: np.ndarray, expected: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio ``20 log10(||e|| / ||e-a||)`` in dB (inf when exact)."""
    diff = actual - expected
    return _sqnr_db(_dot(diff, diff), _dot(expected, expected))


def _sqnr_db(squared_error: float, squared_reference: float) -> float:
    if squared_error == 0:
        return math.inf
    if squared_reference == 0:
        return -math.inf
    return 10.0 * math.log10(squared_reference / squared_error)


BUILTIN_METRICS: Mapping[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "rel_mse": rel_mse,
    "rae": rae,
    "rma": rma,
    "max_abs": max_abs,
    "max_rel": max_rel,
    "cosine": cosine,
    "sqnr_db": sqnr_db,
}


# Elements per pass of ``all_metrics``: float64 temporaries of this size stay in the L2
# cache; whole-array temporaries of a 4M-element pair (32 MB each) cost more in page faults
# than the arithmetic (benchmarks/compare_cost.py: 99-105 ms whole-array, 38 ms chunked).
_CHUNK = 1 << 16


@dataclass(frozen=True)
class PairSums:
    """The sums every built-in metric of one pair is derived from (float64, NaN/Inf excluded)."""

    size: int
    squared_error: float
    squared_reference: float
    squared_actual: float
    dot: float
    sum_abs_diff: float
    sum_abs_e: float
    sum_abs_a: float
    max_abs: float
    max_rel: float
    max_abs_e: float

    def eps_rules_decide(self, bound: float) -> bool:
        """Whether Cambricon's eps rules (eps added to a reference energy <= eps; a total squared
        error <= (2 eps)^2 zeroed) turn a rel_mse above ``bound`` into one within it."""
        return self.raw_rel_mse > bound >= _rel_mse_from_sums(self.squared_error, self.squared_reference)

    @property
    def raw_rel_mse(self) -> float:
        """rel_mse without Cambricon's eps rules: ``sqrt(sum((a-e)^2) / sum(e^2))``."""
        if self.squared_reference == 0:
            return 0.0 if self.squared_error == 0 else math.inf
        return math.sqrt(self.squared_error / self.squared_reference)

    @property
    def eps_zeroed(self) -> bool:
        """Whether Cambricon's eps rule zeroed a non-zero total squared error (<= (2 eps)^2)."""
        return 0 < self.squared_error <= (2 * EPS) ** 2

    def metrics(self) -> dict[str, float]:
        """Every built-in metric (``METRIC_NAMES``) from these sums."""
        if self.size == 0:
            return {"rel_mse": 0.0, "rae": 0.0, "rma": 0.0, "max_abs": 0.0, "max_rel": 0.0,
                    "cosine": 1.0, "sqnr_db": math.inf}
        mean_abs_e, mean_abs_a = self.sum_abs_e / self.size, self.sum_abs_a / self.size
        return {
            "rel_mse": _rel_mse_from_sums(self.squared_error, self.squared_reference),
            "rae": _ratio_or_exact(self.sum_abs_diff, self.sum_abs_e),
            "rma": _ratio_or_exact(abs(mean_abs_e - mean_abs_a), mean_abs_e),
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "cosine": _cosine(self.dot, self.squared_actual, self.squared_reference),
            "sqnr_db": _sqnr_db(self.squared_error, self.squared_reference),
        }


def pair_sums(actual: np.ndarray, expected: np.ndarray) -> PairSums:
    """The sums of one pair of 1-D float arrays, widened to float64 chunk by chunk in one pass."""
    squared_error = squared_reference = squared_actual = dot = 0.0
    sum_abs_diff = sum_abs_e = sum_abs_a = max_abs = max_rel = max_abs_e = 0.0
    for start in range(0, actual.size, _CHUNK):
        a = actual[start:start + _CHUNK].astype(np.float64, copy=False)
        e = expected[start:start + _CHUNK].astype(np.float64, copy=False)
        diff = a - e
        abs_diff, abs_e = np.abs(diff), np.abs(e)
        squared_error += _dot(diff, diff)
        squared_reference += _dot(e, e)
        squared_actual += _dot(a, a)
        dot += _dot(a, e)
        sum_abs_diff += float(abs_diff.sum())
        sum_abs_e += float(abs_e.sum())
        sum_abs_a += float(np.abs(a).sum())
        max_abs = max(max_abs, float(abs_diff.max()))
        max_rel = max(max_rel, _max_rel(abs_diff, abs_e))
        max_abs_e = max(max_abs_e, float(abs_e.max()))
    return PairSums(int(actual.size), squared_error, squared_reference, squared_actual, dot,
                    sum_abs_diff, sum_abs_e, sum_abs_a, max_abs, max_rel, max_abs_e)


def all_metrics(actual: np.ndarray, expected: np.ndarray) -> dict[str, float]:
    """Every built-in metric of one pair of 1-D float arrays (see ``pair_sums``)."""
    return pair_sums(actual, expected).metrics()


def raw_rel_mse_from_sqnr_db(sqnr_db: "float | np.ndarray") -> "float | np.ndarray":
    """rel_mse without Cambricon's eps rules, recovered from ``sqnr_db`` (the same two sums):
    ``sqrt(sum((a-e)^2) / sum(e^2)) = 10^(-sqnr_db / 20)`` (inf dB: 0; -inf dB: inf). For
    records and dumps that keep ``sqnr_db`` but no raw value; NaN stays NaN."""
    return np.power(10.0, -np.asarray(sqnr_db, dtype=np.float64) / 20.0)


# dtype -> (explicit mantissa bits, exponent of the smallest normal): the spacing of the dtype's
# values is 2^(exponent - mantissa bits), the exponent never below the smallest normal's.
_FLOAT_FORMATS = {"float64": (52, -1022), "float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}
ULP_DTYPES = tuple(_FLOAT_FORMATS)


def ulp_of(golden: np.ndarray, dtype: str) -> np.ndarray:
    """The unit in the last place of ``dtype`` at each ``golden`` value: the spacing of the
    dtype's values in the binade of ``|golden|`` (the smallest subnormal for a subnormal or zero)."""
    try:
        mantissa_bits, min_exponent = _FLOAT_FORMATS[dtype]
    except KeyError:
        raise valid_choice("ULP dtype", dtype, tuple(_FLOAT_FORMATS)) from None
    golden = np.abs(golden.astype(np.float64, copy=False))
    # frexp: |g| = m * 2^e with m in [0.5, 1), so the binade's exponent is e - 1 (0 has none)
    exponent = np.where(golden > 0, np.frexp(golden)[1] - 1, min_exponent)
    return np.ldexp(1.0, np.maximum(exponent, min_exponent) - mantissa_bits)


def ulp_errors(actual: np.ndarray, golden: np.ndarray, dtype: str) -> np.ndarray:
    """``|actual - golden|`` in ULPs of ``dtype`` at ``golden``, per element where both are
    finite (NaN/Inf positions excluded, as every metric does); 0 and -0 are 0 ULP apart."""
    a = actual.astype(np.float64, copy=False).ravel()
    g = golden.astype(np.float64, copy=False).ravel()
    finite = np.isfinite(a) & np.isfinite(g)
    return np.abs(a[finite] - g[finite]) / ulp_of(g[finite], dtype)


def ulp_metrics(actual: np.ndarray, golden: np.ndarray, dtype: str) -> dict[str, float]:
    """``ulp_max`` and ``ulp_p99`` (the error 99 % of the elements are within) of a result in
    ``dtype`` against its golden float64 result; 0 when nothing finite is compared."""
    errors = ulp_errors(actual, golden, dtype)
    if errors.size == 0:
        return {"ulp_max": 0.0, "ulp_p99": 0.0}
    return {"ulp_max": float(errors.max()),
            "ulp_p99": float(np.quantile(errors, 0.99, method="inverted_cdf"))}


def check_ulp_bound(metric: str, bound: float) -> None:
    """Refuse a ULP bound below 0.5: no float result can be closer than correctly rounded."""
    if metric in ULP_METRICS and not bound >= CORRECTLY_ROUNDED_ULP:
        raise InvalidArgument(f"{metric} bound {bound!r} is below {CORRECTLY_ROUNDED_ULP} ULP, "
                              f"which even a correctly rounded result cannot meet")
