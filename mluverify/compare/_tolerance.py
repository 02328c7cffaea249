"""Tolerances: the policies of the execution modes and how a case's tolerance is resolved.

Resolution, most specific first: a marker on the test > the ``mluverify_tolerance`` hook >
``[tool.mluverify.tolerances]`` > the policy of the mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mluverify.compare._metrics import JUDGEABLE
from mluverify.errors import ConfigError, InvalidArgument, valid_choice

EXACT = "exact"


@dataclass(frozen=True)
class Tolerance:
    """A bound on one judged metric; ``source`` says where it came from (for reports)."""

    metric: str
    bound: float
    source: str = "user"

    def __post_init__(self) -> None:
        if self.metric != EXACT and self.metric not in JUDGEABLE:
            raise valid_choice("judged metric", self.metric, (*JUDGEABLE, EXACT))
        if not isinstance(self.bound, (int, float)) or not self.bound >= 0:
            raise InvalidArgument(f"tolerance bound must be a number >= 0, got {self.bound!r}")


# The documents' op-test rule: CNNL (layer by layer) within 0.3 %, CNML (fused and quantized)
# within 2 %, relative error measured as rel_mse.
POLICIES: Mapping[str, Tolerance] = {
    "cnnl": Tolerance("rel_mse", 0.003, "policy:cnnl"),
    "cnml": Tolerance("rel_mse", 0.02, "policy:cnml"),
    EXACT: Tolerance(EXACT, 0.0, "policy:exact"),
}


def policy(name: str) -> Tolerance:
    """The tolerance of policy ``name``; InvalidArgument lists the policies."""
    try:
        return POLICIES[name]
    except KeyError:
        raise valid_choice("tolerance policy", name, list(POLICIES)) from None


class ToleranceTable:
    """``[tool.mluverify.tolerances]``: entries keyed ``op``, ``op:dtype``, ``op:dtype:mode``
    or ``op::mode``; a value is a bound on the policy's metric or ``{metric=..., bound=...}``."""

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        self._entries: dict[tuple[str, str, str], tuple[str | None, float]] = {}
        for key, value in (entries or {}).items():
            self._entries[_parse_key(key)] = _parse_value(key, value)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def lookup(self, op: str, dtype: str, mode: str, default: Tolerance) -> Tolerance | None:
        """The most specific entry for (op, dtype, mode), or None."""
        for key in ((op, dtype, mode), (op, dtype, ""), (op, "", mode), (op, "", "")):
            if key in self._entries:
                metric, bound = self._entries[key]
                return Tolerance(metric or default.metric, bound, "config:" + ":".join(key))
        return None


def _parse_key(key: str) -> tuple[str, str, str]:
    parts = key.split(":")
    if not parts[0] or len(parts) > 3:
        raise ConfigError(
            f"[tool.mluverify.tolerances] key {key!r} must be 'op', 'op:dtype', 'op:dtype:mode' "
            "or 'op::mode'"
        )
    return (parts + ["", ""])[0], (parts + ["", ""])[1], (parts + ["", ""])[2]


def _parse_value(key: str, value: Any) -> tuple[str | None, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        metric, bound = None, float(value)
    elif isinstance(value, Mapping) and set(value) <= {"metric", "bound"} and "bound" in value:
        metric, bound = value.get("metric"), value["bound"]
    else:
        raise ConfigError(
            f"[tool.mluverify.tolerances] {key!r} = {value!r}: expected a bound (number) or "
            "a table {metric = 'rel_mse', bound = 0.005}"
        )
    try:
        Tolerance(metric or "rel_mse", bound)
    except InvalidArgument as exc:
        raise ConfigError(f"[tool.mluverify.tolerances] {key!r}: {exc}") from None
    return metric, float(bound)


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
