"""``[tool.mluverify]``: project defaults, read once from pyproject.toml and validated up front."""
from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mluverify.compare import ToleranceTable
from mluverify.errors import ConfigError

KNOWN_KEYS = {"targets", "report_dir", "regress_factor", "noise_floor", "tolerances", "waivers"}


@dataclass(frozen=True)
class Waiver:
    """A known deviation: the case still runs and is recorded, its failure does not fail the test
    until ``until``; an expired waiver fails the gate."""

    reason: str
    until: dt.date

    def expired(self, today: dt.date | None = None) -> bool:
        return (today or dt.date.today()) > self.until


@dataclass(frozen=True)
class Settings:
    """Validated ``[tool.mluverify]`` settings with their defaults."""

    targets: tuple[str, ...] = ("mlu:cnnl",)
    report_dir: str = "reports/latest"
    regress_factor: float = 1.5
    noise_floor: float = 1e-6
    tolerances: ToleranceTable = field(default_factory=ToleranceTable)
    waivers: Mapping[str, Waiver] = field(default_factory=dict)


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
    targets = table.get("targets", defaults.targets)
    if isinstance(targets, str) or not all(isinstance(t, str) for t in targets):
        raise ConfigError(f"{source}: targets must be a list of 'backend:mode' strings, got {targets!r}")
    return Settings(
        targets=tuple(targets),
        report_dir=_typed(table, "report_dir", str, defaults.report_dir, source),
        regress_factor=float(_typed(table, "regress_factor", (int, float), defaults.regress_factor, source)),
        noise_floor=float(_typed(table, "noise_floor", (int, float), defaults.noise_floor, source)),
        tolerances=ToleranceTable(_typed(table, "tolerances", dict, {}, source)),
        waivers=parse_waivers(_typed(table, "waivers", dict, {}, source), source),
    )


def _typed(table: Mapping[str, Any], key: str, kind, default, source: str):
    value = table.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value!r} has the wrong type")
    return value


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
    """``case-id glob -> {reason = "...", until = "YYYY-MM-DD"}``; both keys are required."""
    waivers = {}
    for pattern, entry in entries.items():
        if not isinstance(entry, Mapping) or set(entry) != {"reason", "until"}:
            raise ConfigError(f"{source}: waiver {pattern!r} needs exactly 'reason' and 'until', got {entry!r}")
        waivers[pattern] = make_waiver(entry["reason"], entry["until"], where=f"{source}: waiver {pattern!r}")
    return waivers


def make_waiver(reason: Any, until: Any, where: str = "waiver") -> Waiver:
    """A Waiver from user input; a missing reason or a bad date is a ConfigError naming it."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{where}: a waiver needs a non-empty reason")
    if isinstance(until, str):
        try:
            until = dt.date.fromisoformat(until)
        except ValueError:
            raise ConfigError(f"{where}: until={until!r} is not a date YYYY-MM-DD") from None
    if not isinstance(until, dt.date):
        raise ConfigError(f"{where}: until={until!r} is not a date YYYY-MM-DD")
    return Waiver(reason, until)
