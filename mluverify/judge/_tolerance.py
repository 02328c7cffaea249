"""Tolerances: the policies of the execution modes and how a case's tolerance is resolved.

Resolution, most specific first: a marker on the test > the ``mluverify_tolerance`` hook >
``[tool.mluverify.tolerances]`` > the policy of the mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mluverify.judge._metrics import JUDGEABLE, ULP_METRICS, check_ulp_bound
from mluverify.errors import ConfigError, InvalidArgument, valid_choice

EXACT = "exact"
GOLDEN = "golden"
ANY_OP = "*"
# Case dtypes a tolerance key may name (the precision the device computes in).
DTYPES = frozenset({"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                    "uint8", "bool", "complex64", "complex128"})


@dataclass(frozen=True)
class Tolerance:
    """A bound on one judged metric; ``source`` says where it came from (for reports).

    ``golden`` tolerances judge the device against a float64 ("golden") result instead: pass
    iff ``device_error <= k * reference_error + floor`` in ``metric`` (``GoldenRule``);
    ``bound`` is then unused until the rule turns it into a number for one comparison.
    ULP metrics (``ulp_max``, ``ulp_p99``) are measured against the golden result too; their
    bound is at least 0.5 (correctly rounded).
    """

    metric: str
    bound: float
    source: str = "user"
    golden: bool = False

    def __post_init__(self) -> None:
        if self.metric != EXACT and self.metric not in JUDGEABLE:
            raise valid_choice("judged metric", self.metric, (*JUDGEABLE, EXACT))
        if not isinstance(self.bound, (int, float)) or not self.bound >= 0:
            raise InvalidArgument(f"tolerance bound must be a number >= 0, got {self.bound!r}")
        check_ulp_bound(self.metric, self.bound)

    @property
    def needs_golden(self) -> bool:
        """Whether judging needs the golden float64 result: the golden policy and ULP metrics."""
        return self.golden or self.metric in ULP_METRICS


@dataclass(frozen=True)
class GoldenRule:
    """The ``golden`` policy for one dtype: ``device_error <= k * reference_error + floor``.

    ``k`` follows ``torch._dynamo.utils.same()`` as of torch 2.14.1 (2 for float32 results, 3
    for float16 / bfloat16, 3 for tensors of fewer than ``small_numel`` elements, where noise
    dominates RMSE); ``floor`` is two units of roundoff of the dtype (``2 * 2**-p``): what a
    correctly rounded result in that precision may differ by when the CPU's own error is ~0.
    """

    k: float
    floor: float
    small_k: float = 3.0
    small_numel: int = 1000

    def __post_init__(self) -> None:
        if not isinstance(self.k, (int, float)) or not self.k > 0:
            raise InvalidArgument(f"golden rule k must be a number > 0, got {self.k!r}")
        if not isinstance(self.floor, (int, float)) or not self.floor >= 0:
            raise InvalidArgument(f"golden rule floor must be a number >= 0, got {self.floor!r}")

    def multiplier(self, numel: int) -> float:
        """k for a result of ``numel`` elements."""
        return max(self.k, self.small_k) if numel < self.small_numel else self.k

    def bound(self, reference_error: float, numel: int) -> float:
        """The device error allowed for a result of ``numel`` elements."""
        return self.multiplier(numel) * reference_error + self.floor


GOLDEN_RULES: Mapping[str, GoldenRule] = {
    "float64": GoldenRule(2.0, 2 * 2.0**-53),
    "float32": GoldenRule(2.0, 2 * 2.0**-24),
    "float16": GoldenRule(3.0, 2 * 2.0**-11),
    "bfloat16": GoldenRule(3.0, 2 * 2.0**-8),
}


# The documents' op-test rule: CNNL (layer by layer) within 0.3 %, CNML (fused and quantized)
# within 2 %, relative error measured as rel_mse.
POLICIES: Mapping[str, Tolerance] = {
    "cnnl": Tolerance("rel_mse", 0.003, "policy:cnnl"),
    "cnml": Tolerance("rel_mse", 0.02, "policy:cnml"),
    EXACT: Tolerance(EXACT, 0.0, "policy:exact"),
    GOLDEN: Tolerance("rel_mse", 0.0, "policy:golden", golden=True),
}


def policy(name: str) -> Tolerance:
    """The tolerance of policy ``name``; InvalidArgument lists the policies."""
    try:
        return POLICIES[name]
    except KeyError:
        raise valid_choice("tolerance policy", name, list(POLICIES)) from None


class ToleranceTable:
    """``[tool.mluverify.tolerances]``: entries keyed ``op``, ``op:dtype``, ``op:dtype:mode``
    or ``op::mode`` (``*`` as op: every op); a value is a bound on the policy's metric,
    ``{metric=..., bound=...}``, or a policy name (``"golden"``, ``"cnnl"``, ...) that judges
    the matching cases instead of their mode's policy. ``source``: the file the table was
    read from, named by its errors."""

    def __init__(self, entries: Mapping[str, Any] | None = None, source: str = "") -> None:
        self.source = source
        self._entries: dict[tuple[str, str, str], Tolerance | float] = {}
        try:
            for key, value in (entries or {}).items():
                self._entries[_parse_key(key)] = _parse_value(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}" if source else str(exc)) from None

    def __bool__(self) -> bool:
        return bool(self._entries)

    def modes(self) -> dict[str, str]:
        """The mode each key names (key -> mode), to check against the loaded back ends' modes."""
        return {":".join(key): key[2] for key in self._entries if key[2]}

    def lookup(self, op: str, dtype: str, mode: str, default: Tolerance) -> Tolerance | None:
        """The most specific entry for (op, dtype, mode), or None; a bare bound bounds the
        metric of ``default`` (the mode's policy)."""
        for name in (op, ANY_OP):
            for key in ((name, dtype, mode), (name, dtype, ""), (name, "", mode), (name, "", "")):
                entry = self._entries.get(key)
                if entry is None:
                    continue
                source = "config:" + ":".join(key)
                if isinstance(entry, Tolerance):
                    return Tolerance(entry.metric, entry.bound, source, entry.golden)
                return Tolerance(default.metric if not default.golden else "rel_mse", entry, source)
        return None


def _parse_key(key: str) -> tuple[str, str, str]:
    parts = key.split(":")
    if not parts[0] or len(parts) > 3:
        raise ConfigError(
            f"[tool.mluverify.tolerances] key {key!r} must be 'op', 'op:dtype', 'op:dtype:mode' "
            "or 'op::mode' ('*' as op: every op)"
        )
    op, dtype, mode = (parts + ["", ""])[:3]
    if dtype and dtype not in DTYPES:
        raise ConfigError(f"[tool.mluverify.tolerances] key {key!r}: unknown dtype {dtype!r}; "
                          f"valid: {', '.join(sorted(DTYPES))}")
    return op, dtype, mode


def _parse_value(key: str, value: Any) -> Tolerance | float:
    """A table value: a bare bound (float), or a Tolerance (metric and bound, or a policy)."""
    where = f"[tool.mluverify.tolerances] {key!r}"
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return Tolerance("rel_mse", value).bound
        if isinstance(value, str):
            return policy(value)
        if isinstance(value, Mapping) and set(value) <= {"metric", "bound"} and "bound" in value:
            return Tolerance(value.get("metric", "rel_mse"), value["bound"])
    except InvalidArgument as exc:
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(
        f"{where} = {value!r}: expected a bound (number), a table {{metric = 'rel_mse', "
        f"bound = 0.005}} or a policy name ({', '.join(sorted(POLICIES))})"
    )


def parse_golden_rules(entries: Mapping[str, Any], source: str = "[tool.mluverify.golden]") -> dict[str, GoldenRule]:
    """``dtype -> {k = 2.0, floor = 1.2e-7}`` over the defaults (``GOLDEN_RULES``); a ConfigError
    names the dtype and key that is wrong."""
    rules = dict(GOLDEN_RULES)
    for dtype, entry in entries.items():
        if dtype not in DTYPES:
            raise ConfigError(f"{source}: unknown dtype {dtype!r}; valid: {', '.join(sorted(DTYPES))}")
        if not isinstance(entry, Mapping) or not set(entry) <= {"k", "floor"}:
            raise ConfigError(f"{source}: {dtype} = {entry!r}: expected a table {{k = 2.0, floor = 1.2e-7}}")
        base = rules.get(dtype, GOLDEN_RULES["float32"])
        try:
            rules[dtype] = GoldenRule(entry.get("k", base.k), entry.get("floor", base.floor))
        except InvalidArgument as exc:
            raise ConfigError(f"{source}: {dtype}: {exc}") from None
    return rules


def resolve_tolerance(
    *,
    op: str,
    dtype: str,
    mode: str,
    policy_name: str,
    marker: Tolerance | float | None = None,
    hook: Tolerance | None = None,
    table: ToleranceTable | None = None,
) -> Tolerance:
    """The tolerance of one case: marker > hook > config table > the mode's policy."""
    default = policy(policy_name)
    if marker is not None:
        return marker if isinstance(marker, Tolerance) else Tolerance(default.metric, marker, "marker")
    if hook is not None:
        if not isinstance(hook, Tolerance):
            raise InvalidArgument(
                f"mluverify_tolerance must return a Tolerance or None, got {hook!r} "
                f"(type={type(hook).__name__})"
            )
        return hook
    if table:
        found = table.lookup(op, dtype, mode, default)
        if found is not None:
            return found
    return default
