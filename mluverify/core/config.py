"""``[tool.mluverify]``: project defaults, read once from pyproject.toml and validated up front."""
from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mluverify.judge import GOLDEN_RULES, GoldenRule, ToleranceTable, parse_golden_rules
from mluverify.errors import ConfigError
from mluverify.core.status import PROVENANCE_STATUSES

KNOWN_KEYS = {"targets", "report_dir", "regress_factor", "noise_floor", "tolerances", "waivers",
              "allow", "skip", "core_versions", "determinism_share", "golden", "device_count", "fallback"}
# How the emulated MLU treats ops it cannot run (mluverify/device/_fallback.py, docs/device.md).
FALLBACK_RULES = ("cpu", "seed")


@dataclass(frozen=True)
class Waiver:
    """A known deviation: the case still runs and is recorded, its failure does not fail the test
    until ``until``; an expired waiver fails the gate."""

    reason: str
    until: dt.date
    max: float | None = None  # a ceiling: a waived case whose judged metric exceeds it fails the gate

    def expired(self, today: dt.date | None = None) -> bool:
        return (today or dt.date.today()) > self.until


@dataclass(frozen=True)
class Settings:
    """Validated ``[tool.mluverify]`` settings with their defaults (the one place they live).

    ``allow``: statuses admitted (the test passes, the gate accepts; still counted apart);
    ``skip``: statuses reported as skips (the gate still fails on them unless allowed);
    ``core_versions``: device variants each target runs on (empty: each back end's default);
    ``determinism_share``: the share of cases run twice on the device (0 to 1);
    ``golden``: the golden policy's k and floor per dtype;
    ``device_count``: emulated MLU cards (``MLUVERIFY_DEVICE_COUNT`` overrides);
    ``fallback``: the emulated MLU's fallback rule, one of FALLBACK_RULES (``MLUVERIFY_FALLBACK`` overrides).
    """

    targets: tuple[str, ...] = ("mlu:cnnl",)
    report_dir: str = "reports/latest"
    regress_factor: float = 1.5
    noise_floor: float = 1e-6
    tolerances: ToleranceTable = field(default_factory=ToleranceTable)
    waivers: Mapping[str, Waiver] = field(default_factory=dict)
    allow: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    core_versions: tuple[str, ...] = ()
    determinism_share: float = 0.1
    golden: Mapping[str, GoldenRule] = field(default_factory=lambda: dict(GOLDEN_RULES))
    device_count: int = 1
    fallback: str = "cpu"


def load_settings(pyproject: Path | None) -> Settings:
    """Read ``[tool.mluverify]`` from ``pyproject`` (missing file or table: the defaults)."""
    if pyproject is None or not pyproject.is_file():
        return Settings()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject} is not valid TOML: {exc}") from None
    return parse_settings(data.get("tool", {}).get("mluverify", {}), source=str(pyproject))


def parse_settings(table: Mapping[str, Any], source: str = "[tool.mluverify]") -> Settings:
    """Validate a ``[tool.mluverify]`` table; ConfigError names the key and the file."""
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.mluverify] key(s) {sorted(unknown)}; valid: {sorted(KNOWN_KEYS)}")
    defaults = Settings()
    return Settings(
        targets=_strings(table, "targets", defaults.targets, source, non_empty=True),
        report_dir=_typed(table, "report_dir", str, defaults.report_dir, source),
        regress_factor=_number(table, "regress_factor", defaults.regress_factor, source, low=1.0),
        noise_floor=_number(table, "noise_floor", defaults.noise_floor, source, low=0.0),
        tolerances=ToleranceTable(_typed(table, "tolerances", dict, {}, source)),
        waivers=parse_waivers(_typed(table, "waivers", dict, {}, source), source),
        allow=_statuses(table, "allow", source),
        skip=_statuses(table, "skip", source),
        core_versions=_strings(table, "core_versions", defaults.core_versions, source),
        determinism_share=_number(table, "determinism_share", defaults.determinism_share, source,
                                  low=0.0, high=1.0),
        golden=parse_golden_rules(_typed(table, "golden", dict, {}, f"{source}.golden"), f"{source}.golden"),
        device_count=_whole(table, "device_count", defaults.device_count, source, low=1),
        fallback=_choice(table, "fallback", defaults.fallback, FALLBACK_RULES, source),
    )


def _whole(table: Mapping[str, Any], key: str, default: int, source: str, *, low: int) -> int:
    value = _typed(table, key, int, default, source)
    if value < low:
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value} must be >= {low}")
    return value


def _choice(table: Mapping[str, Any], key: str, default: str, valid: tuple[str, ...], source: str) -> str:
    value = _typed(table, key, str, default, source)
    if value not in valid:
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value!r}; valid: {', '.join(map(repr, valid))}")
    return value


def _typed(table: Mapping[str, Any], key: str, kind, default, source: str):
    value = table.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value!r} has the wrong type")
    return value


def _number(table: Mapping[str, Any], key: str, default: float, source: str, *, low: float,
            high: float | None = None) -> float:
    value = float(_typed(table, key, (int, float), default, source))
    if not (value >= low and (high is None or value <= high)):
        allowed = f">= {low:g}" if high is None else f"between {low:g} and {high:g}"
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value:g} must be {allowed}")
    return value


def _strings(table: Mapping[str, Any], key: str, default: tuple[str, ...], source: str, *,
             non_empty: bool = False) -> tuple[str, ...]:
    value = table.get(key, default)
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: [tool.mluverify] {key} must be a list of strings, got {value!r}")
    if non_empty and not value:
        raise ConfigError(f"{source}: [tool.mluverify] {key} is empty; name at least one, e.g. ['mlu:cnnl']")
    return tuple(value)


def _statuses(table: Mapping[str, Any], key: str, source: str) -> tuple[str, ...]:
    names = _strings(table, key, (), source)
    unknown = [name for name in names if name not in PROVENANCE_STATUSES]
    if unknown:
        raise ConfigError(f"{source}: [tool.mluverify] {key} names unknown status(es) {unknown}; "
                          f"valid: {list(PROVENANCE_STATUSES)}")
    return names


def case_id_regex(pattern: str) -> str:
    """A regular expression for a case-id glob where only ``*`` (any text) and ``?`` (one
    character) are special: ``[`` and ``]`` are literal, as in parametrized ids like
    ``test_x.py::test_y[mlu:cnml-int8]``."""
    parts = (re.escape(piece) for piece in re.split(r"([*?])", pattern))
    return "".join({"\\*": ".*", "\\?": "."}.get(part, part) for part in parts) + r"\Z"


def matches_case_id(pattern: str, case_id: str) -> bool:
    """Whether ``case_id`` matches the glob ``pattern`` (see ``case_id_regex``)."""
    return re.match(case_id_regex(pattern), case_id) is not None


def parse_waivers(entries: Mapping[str, Any], source: str = "[tool.mluverify.waivers]") -> dict[str, Waiver]:
    """``case-id glob -> {reason = "...", until = "YYYY-MM-DD", max = 0.04}``: reason and until
    are required; ``max`` (optional) is a ceiling on the waived case's judged metric."""
    waivers = {}
    for pattern, entry in entries.items():
        if not isinstance(entry, Mapping) or not {"reason", "until"} <= set(entry) <= {"reason", "until", "max"}:
            raise ConfigError(f"{source}: waiver {pattern!r} needs 'reason' and 'until' (and optionally "
                              f"'max'), got {entry!r}")
        waivers[pattern] = make_waiver(entry["reason"], entry["until"], entry.get("max"),
                                       where=f"{source}: waiver {pattern!r}")
    return waivers


def make_waiver(reason: Any, until: Any, ceiling: Any = None, where: str = "waiver") -> Waiver:
    """A Waiver from user input; a missing reason, a bad date or a bad ceiling is a ConfigError
    naming it."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{where}: a waiver needs a non-empty reason")
    if isinstance(until, str):
        try:
            until = dt.date.fromisoformat(until)
        except ValueError:
            raise ConfigError(f"{where}: until={until!r} is not a date YYYY-MM-DD") from None
    if not isinstance(until, dt.date):
        raise ConfigError(f"{where}: until={until!r} is not a date YYYY-MM-DD")
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float)) or ceiling < 0):
        raise ConfigError(f"{where}: max={ceiling!r} must be a number >= 0 (a ceiling on the judged metric)")
    return Waiver(reason, until, None if ceiling is None else float(ceiling))
