"""Waivers: known deviations, keyed by case-id globs, from every source in one format.

Sources: the ``mlu_waiver`` marker (``make_waiver``), ``[tool.mluverify.waivers]``
(``parse_waivers``), and waiver files such as ``suites/opinfo/waivers.toml`` or
``reports/inductor/waivers.toml`` (``load_waivers``): a ``[waivers]`` table of
``"<glob>" = { reason = "...", until = "YYYY-MM-DD", max = 0.04 }``. A glob's only special
characters are ``*`` and ``?`` (``case_id_regex``).
"""
from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mluverify.errors import ConfigError

REQUIRED_KEYS = frozenset({"reason", "until"})
OPTIONAL_KEYS = frozenset({"max"})


@dataclass(frozen=True)
class Waiver:
    """A known deviation: the case still runs and is recorded, its failure does not fail the test
    until ``until``; an expired waiver fails the gate. ``skip``: the case raises on the device
    itself, there is no verdict to waive (only waiver files loaded with ``skippable`` say so;
    the front end that builds the case skips it)."""

    reason: str
    until: dt.date
    max: float | None = None  # a ceiling: a waived case whose judged metric exceeds it fails the gate
    skip: bool = False

    def expired(self, today: dt.date | None = None) -> bool:
        return (today or dt.date.today()) > self.until


def case_id_regex(pattern: str) -> str:
    """A regular expression for a case-id glob where only ``*`` (any text) and ``?`` (one
    character) are special: ``[`` and ``]`` are literal, as in parametrized ids like
    ``test_x.py::test_y[mlu:cnml-int8]``."""
    parts = (re.escape(piece) for piece in re.split(r"([*?])", pattern))
    return "".join({"\\*": ".*", "\\?": "."}.get(part, part) for part in parts) + r"\Z"


def matches_case_id(pattern: str, case_id: str) -> bool:
    """Whether ``case_id`` matches the glob ``pattern`` (see ``case_id_regex``)."""
    return re.match(case_id_regex(pattern), case_id) is not None


def waiver_for(case_id: str, waivers: Mapping[str, Waiver]) -> Waiver | None:
    """The first waiver whose glob matches ``case_id``, else None."""
    return next((waiver for pattern, waiver in waivers.items() if matches_case_id(pattern, case_id)), None)


def parse_waivers(entries: Mapping[str, Any], source: str = "[tool.mluverify.waivers]", *,
                  skippable: bool = False) -> dict[str, Waiver]:
    """``case-id glob -> {reason = "...", until = "YYYY-MM-DD", max = 0.04}``: reason and until
    are required; ``max`` (optional) is a ceiling on the waived case's judged metric; ``skip``
    (optional, only when ``skippable``) marks a case to skip. A ConfigError names ``source`` and
    the entry."""
    allowed = REQUIRED_KEYS | OPTIONAL_KEYS | ({"skip"} if skippable else set())
    waivers = {}
    for pattern, entry in entries.items():
        if not isinstance(entry, Mapping) or not REQUIRED_KEYS <= set(entry) <= allowed:
            optional = " or ".join(repr(key) for key in sorted(allowed - REQUIRED_KEYS))
            raise ConfigError(f"{source}: waiver {pattern!r} needs 'reason' and 'until' (and optionally "
                              f"{optional}), got {entry!r}")
        where = f"{source}: waiver {pattern!r}"
        skip = entry.get("skip", False)
        if not isinstance(skip, bool):
            raise ConfigError(f"{where}: skip={skip!r} must be true or false")
        waiver = make_waiver(entry["reason"], entry["until"], entry.get("max"), where=where)
        waivers[pattern] = Waiver(waiver.reason, waiver.until, waiver.max, skip)
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


def load_waivers(path: Path, *, skippable: bool = False) -> dict[str, Waiver]:
    """The ``[waivers]`` table of the TOML file ``path`` (see ``parse_waivers``); none when the
    file does not exist. Errors name the file (and the entry)."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    entries = data.get("waivers", {})
    if not isinstance(entries, Mapping):
        raise ConfigError(f"{path}: [waivers] must be a table of case-id globs, got {entries!r}")
    return parse_waivers(entries, f"{path} [waivers]", skippable=skippable)
