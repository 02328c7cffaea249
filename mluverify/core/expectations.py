"""Expectations: known deviations (waivers), keyed by case-id globs, from every source in one format.

Sources: the ``mlu_waiver`` marker (``make_waiver``), ``[tool.mluverify.waivers]``
(``parse_waivers``), and waiver files such as ``suites/opinfo/waivers.toml`` or
``reports/inductor/waivers.toml`` (``load_waivers``): a ``[waivers]`` table of
``"<glob>" = { reason = "...", until = "YYYY-MM-DD", category = "quantization", link = "...",
max = 0.04, max_by_kind = { group = 0.18 }, scope = { targets = [...], cores = [...], devices = [...],
torch = ">=2.10,<2.15" } }``.
A glob's only special characters are ``*`` and ``?`` (``case_id_regex``). Every match goes
through ``covers``: the glob on the case id and the scope on where the case ran (``Where``).
"""
from __future__ import annotations

import datetime as dt
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mluverify.core.gradients import OUTPUT, RECORD_KINDS
from mluverify.errors import ConfigError

REQUIRED_KEYS = frozenset({"reason", "until"})
OPTIONAL_KEYS = frozenset({"max", "max_by_kind", "category", "link", "scope", "created"})
UNSUPPORTED = "unsupported"  # a waiver of where a case ran, not of its value: it needs no ceiling
# Why a case deviates (docs/configuration.md "Expectations" explains each).
CATEGORIES = ("quantization", "reduction order", "reference inaccuracy", "dtype range", "device bug",
              UNSUPPORTED, "harness bug", "upstream bug")
# What a waived comparison above its waiver's ceiling is: a failure, in the record and at the gate.
WAIVED_BUT_WORSENED = "waived but worsened"
KNOWN_TARGETS = ("mlu:cnnl", "mlu:cnml", "mlu:offline", "cpu:inductor", "cuda:eager", "cuda:inductor",
                 "xpu:eager", "mps:eager")
KNOWN_CORE_VERSIONS = ("MLU270", "MLU370")
KNOWN_DEVICES = ("emulator", "torch_mlu", "cuda")
SCOPE_KEYS = {"targets": KNOWN_TARGETS, "cores": KNOWN_CORE_VERSIONS, "devices": KNOWN_DEVICES}


@dataclass(frozen=True)
class Where:
    """Where a case ran: what a waiver's scope is matched against (None: not known)."""

    target: str | None = None
    core_version: str | None = None
    device_impl: str | None = None
    torch_version: str | None = None


@dataclass(frozen=True)
class Scope:
    """Where a waiver holds; an empty field holds everywhere. ``torch``: ``(lowest, below)``
    versions, either None for an open end."""

    targets: frozenset[str] = frozenset()
    cores: frozenset[str] = frozenset()
    devices: frozenset[str] = frozenset()
    torch: tuple[tuple[int, ...] | None, tuple[int, ...] | None] = (None, None)

    def holds(self, where: Where) -> bool:
        """Whether ``where`` is inside the scope; a scoped field that ``where`` does not know
        does not hold (a waiver never excuses what it cannot confirm)."""
        for wanted, have in ((self.targets, where.target), (self.cores, where.core_version),
                             (self.devices, where.device_impl)):
            if wanted and have not in wanted:
                return False
        lowest, below = self.torch
        if lowest is None and below is None:
            return True
        if not where.torch_version:
            return False
        version = version_tuple(where.torch_version)
        return (lowest is None or version >= lowest) and (below is None or version < below)


@dataclass(frozen=True)
class Waiver:
    """A known deviation: the case still runs and is recorded, its failure does not fail the test
    until ``until``; an expired waiver fails the gate. ``skip``: the case raises on the device
    itself, there is no verdict to waive (only waiver files loaded with ``skippable`` say so;
    the front end that builds the case skips it). ``category``: one of ``CATEGORIES`` ("" when
    not categorised); ``scope``: where it holds."""

    reason: str
    until: dt.date
    max: float | None = None  # a ceiling: a judged metric above it is not excused (``over_ceiling``)
    skip: bool = False
    category: str = ""
    link: str = ""
    scope: Scope = Scope()
    # (record kind, ceiling) pairs: a kind's own ceiling in place of ``max`` (a fused group's
    # inner values err more than the case's outputs, and one ceiling for both would hide the outputs')
    max_by_kind: tuple[tuple[str, float], ...] = ()

    def expired(self, today: dt.date | None = None) -> bool:
        return (today or dt.date.today()) > self.until

    @property
    def needs_ceiling(self) -> bool:
        """Whether the waiver excuses a value and so must have a ``max``: all but a ``skip`` and
        an ``unsupported`` one (it excuses where a case ran: a CPU fallback, no compilation)."""
        return not self.skip and self.category != UNSUPPORTED

    def ceiling(self, kind: str = OUTPUT) -> tuple[str, float | None]:
        """The ceiling on a record of ``kind`` (``RECORD_KINDS``) and its name in the waiver:
        the kind's own in ``max_by_kind``, else ``max``."""
        own = dict(self.max_by_kind).get(kind)
        return ("max", self.max) if own is None else (f"max_by_kind.{kind}", own)

    def over_ceiling(self, value: float | None, kind: str = OUTPUT) -> bool:
        """Whether the judged ``value`` of a record of ``kind`` is above its ``ceiling``: then the
        waiver excuses nothing (a case with no value, errored, is not above it)."""
        ceiling = self.ceiling(kind)[1]
        return ceiling is not None and value is not None and value > ceiling

    def worsened(self, metric: str, value: float, kind: str = OUTPUT) -> str:
        """Why a value ``over_ceiling`` is not excused, for the record's reason."""
        name, ceiling = self.ceiling(kind)
        return f"{WAIVED_BUT_WORSENED}: {metric} {value:.4g} > the waiver's ceiling {name} {ceiling:g} ({self.reason})"


@functools.lru_cache(maxsize=4096)
def case_id_regex(pattern: str) -> str:
    """A regular expression for a case-id glob where only ``*`` (any text) and ``?`` (one
    character) are special: ``[`` and ``]`` are literal, as in parametrized ids like
    ``test_x.py::test_y[mlu:cnml-int8]``."""
    parts = (re.escape(piece) for piece in re.split(r"([*?])", pattern))
    return "".join({"\\*": ".*", "\\?": "."}.get(part, part) for part in parts) + r"\Z"


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(case_id_regex(pattern))


def matches_case_id(pattern: str, case_id: str) -> bool:
    """Whether ``case_id`` matches the glob ``pattern`` (see ``case_id_regex``)."""
    return _compiled(pattern).match(case_id) is not None


def covers(pattern: str, waiver: Waiver, case_id: str, where: Where | None = None) -> bool:
    """Whether the waiver ``pattern -> waiver`` applies to ``case_id`` run at ``where``: the one
    matching rule of every front end, the gate and ``mluverify expectations check``. ``where``
    None matches the glob only: a front end that turns waivers into ``mlu_waiver`` marks at
    collection leaves the scope to the run (the mark carries it, see ``marker_fields``)."""
    return matches_case_id(pattern, case_id) and (where is None or waiver.scope.holds(where))


def waiver_for(case_id: str, waivers: Mapping[str, Waiver], where: Where | None = None,
               today: dt.date | None = None) -> Waiver | None:
    """The first waiver that ``covers`` ``case_id`` at ``where`` (unexpired on ``today`` when
    given), else None."""
    found = covering(case_id, waivers, where, today)
    return None if found is None else found[1]


def covering(case_id: str, waivers: Mapping[str, Waiver], where: Where | None = None,
             today: dt.date | None = None) -> tuple[str, Waiver] | None:
    """``(glob, waiver)`` of the first waiver that ``covers`` ``case_id`` at ``where``
    (unexpired on ``today`` when given), else None."""
    return next(((pattern, waiver) for pattern, waiver in waivers.items()
                 if (today is None or not waiver.expired(today)) and covers(pattern, waiver, case_id, where)),
                None)


def marker_fields(waiver: Waiver) -> dict[str, Any]:
    """The ``mlu_waiver`` mark's keyword arguments after ``reason, until`` that rebuild ``waiver``
    (``make_waiver``): ``pytest.mark.mlu_waiver(w.reason, w.until, **marker_fields(w))``."""
    return {"max": waiver.max, "max_by_kind": dict(waiver.max_by_kind), "category": waiver.category,
            "link": waiver.link, "scope": waiver.scope}


def version_tuple(text: str) -> tuple[int, ...]:
    """``"2.10.1+cpu"`` -> ``(2, 10, 1)``; a ValueError when it does not start with a number."""
    numbers = re.match(r"\d+(?:\.\d+)*", text.strip())
    if numbers is None:
        raise ValueError(f"{text!r} is not a version")
    return tuple(int(part) for part in numbers.group().split("."))


def parse_waivers(entries: Mapping[str, Any], source: str = "[tool.mluverify.waivers]", *,
                  skippable: bool = False) -> dict[str, Waiver]:
    """``case-id glob -> {reason, until, category, link, max, max_by_kind, scope, created}``:
    reason and until are required; ``max`` (optional) is a ceiling on the waived case's judged
    metric, ``max_by_kind`` (optional) one per record kind in its place;
    ``skip`` (optional, only when ``skippable``) marks a case to skip. A ConfigError names
    ``source`` and the entry."""
    allowed = REQUIRED_KEYS | OPTIONAL_KEYS | ({"skip"} if skippable else set())
    waivers = {}
    for pattern, entry in entries.items():
        where = f"{source}: waiver {pattern!r}"
        if not isinstance(entry, Mapping) or not REQUIRED_KEYS <= set(entry) <= allowed:
            optional = ", ".join(repr(key) for key in sorted(allowed - REQUIRED_KEYS))
            raise ConfigError(f"{where} needs 'reason' and 'until' (and optionally {optional}), got {entry!r}")
        skip = entry.get("skip", False)
        if not isinstance(skip, bool):
            raise ConfigError(f"{where}: skip={skip!r} must be true or false")
        waivers[pattern] = make_waiver(
            entry["reason"], entry["until"], entry.get("max"), where=where, skip=skip,
            max_by_kind=entry.get("max_by_kind"),
            category=entry.get("category", ""), link=entry.get("link", ""), scope=entry.get("scope"),
            created=entry.get("created"))
    return waivers


def make_waiver(reason: Any, until: Any, ceiling: Any = None, where: str = "waiver", *, skip: bool = False,
                category: Any = "", link: Any = "", scope: Any = None, created: Any = None,
                max_by_kind: Any = None) -> Waiver:
    """A Waiver from user input; a missing reason, a bad date, a bad ceiling (``ceiling``: its
    ``max``; ``max_by_kind``: ``{record kind: ceiling}``), an unknown category, a bad scope or an
    expiry before ``created`` is a ConfigError naming it."""
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{where}: a waiver needs a non-empty reason")
    until = _date(until, "until", where)
    if created is not None and until < _date(created, "created", where):
        raise ConfigError(f"{where}: until={until.isoformat()} is before created={created}: "
                          f"the waiver would be expired when written")
    _check_ceiling(ceiling, "max", where)
    by_kind = _ceilings_by_kind(max_by_kind, where)
    if category != "" and category not in CATEGORIES:
        raise ConfigError(f"{where}: category={category!r} is unknown; valid: {', '.join(map(repr, CATEGORIES))}")
    if not isinstance(link, str):
        raise ConfigError(f"{where}: link={link!r} must be a string (an issue or bug URL)")
    return Waiver(reason, until, None if ceiling is None else float(ceiling), skip, category, link,
                  parse_scope(scope, where), by_kind)


def _check_ceiling(ceiling: Any, name: str, where: str) -> None:
    if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, (int, float)) or ceiling < 0):
        raise ConfigError(f"{where}: {name}={ceiling!r} must be a number >= 0 (a ceiling on the judged metric)")


def _ceilings_by_kind(entry: Any, where: str) -> tuple[tuple[str, float], ...]:
    """``{group = 0.18}`` as ``(("group", 0.18),)``; a kind not in ``RECORD_KINDS`` or a bad
    ceiling is a ConfigError."""
    if entry is None:
        return ()
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: max_by_kind={entry!r} must be a table of record kind = ceiling")
    unknown = sorted(set(entry) - set(RECORD_KINDS))
    if unknown:
        raise ConfigError(f"{where}: max_by_kind names unknown record kind {', '.join(map(repr, unknown))}; "
                          f"valid: {', '.join(RECORD_KINDS)}")
    for kind, ceiling in entry.items():
        if ceiling is None:
            raise ConfigError(f"{where}: max_by_kind.{kind}=None must be a number >= 0 (a ceiling on the judged metric)")
        _check_ceiling(ceiling, f"max_by_kind.{kind}", where)
    return tuple(sorted((kind, float(ceiling)) for kind, ceiling in entry.items()))


def parse_scope(entry: Any, where: str = "waiver") -> Scope:
    """``{targets = [...], cores = [...], devices = [...], torch = ">=2.10,<2.15"}`` (each
    optional) as a Scope; unknown names, keys or an inverted torch range are a ConfigError."""
    if entry is None or isinstance(entry, Scope):
        return entry or Scope()
    if not isinstance(entry, Mapping) or not set(entry) <= {*SCOPE_KEYS, "torch"}:
        raise ConfigError(f"{where}: scope={entry!r} must be a table of {', '.join(sorted({*SCOPE_KEYS, 'torch'}))}")
    fields: dict[str, Any] = {}
    for key, known in SCOPE_KEYS.items():
        names = entry.get(key, [])
        if isinstance(names, str) or not all(isinstance(name, str) for name in names):
            raise ConfigError(f"{where}: scope {key}={names!r} must be a list of names")
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ConfigError(f"{where}: scope {key} names unknown {', '.join(map(repr, unknown))}; "
                              f"valid: {', '.join(known)}")
        fields[key] = frozenset(names)
    return Scope(**fields, torch=_torch_range(entry.get("torch"), where))


def _torch_range(text: Any, where: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``">=2.10,<2.15"`` (either bound optional) -> ``((2, 10), (2, 15))``."""
    if text is None:
        return None, None
    bounds: dict[str, tuple[int, ...]] = {}
    for part in str(text).split(","):
        found = re.fullmatch(r"\s*(>=|<)\s*(\d+(?:\.\d+)*)\s*", part)
        if not isinstance(text, str) or found is None or found.group(1) in bounds:
            raise ConfigError(f"{where}: scope torch={text!r} must be '>=LOW', '<HIGH' or '>=LOW,<HIGH'")
        bounds[found.group(1)] = version_tuple(found.group(2))
    lowest, below = bounds.get(">="), bounds.get("<")
    if lowest is not None and below is not None and lowest >= below:
        raise ConfigError(f"{where}: scope torch={text!r} is an empty (inverted) version range")
    return lowest, below


def _date(value: Any, key: str, where: str) -> dt.date:
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value)
        except ValueError:
            raise ConfigError(f"{where}: {key}={value!r} is not a date YYYY-MM-DD") from None
    if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
        raise ConfigError(f"{where}: {key}={value!r} is not a date YYYY-MM-DD")
    return value


@dataclass(frozen=True)
class ExpectationsFile:
    """One source of waivers: ``path`` (None: none to rewrite), its ``table`` (the TOML keys that
    hold it, e.g. ``("waivers",)``), its ``waivers`` and, per waiver key, the case-id glob the
    key stands for (``[expectations] case_ids``: a suite file's keys are globs on case names)."""

    path: Path | None
    table: tuple[str, ...]
    waivers: Mapping[str, Waiver]
    case_id_globs: Mapping[str, str]


def load_expectations(path: Path, *, skippable: bool = False) -> ExpectationsFile:
    """The expectations file ``path``: ``[waivers]`` (see ``parse_waivers``) and the optional
    ``[expectations] case_ids = { "<key prefix>" = "<case-id glob with {key}>" }`` that turns a
    key (less its longest matching prefix) into a case-id glob; keys no prefix matches are
    case-id globs themselves. A missing file holds nothing. Errors name the file (and entry)."""
    path = Path(path)
    data = _toml(path) if path.is_file() else {}
    entries = data.get("waivers", {})
    if not isinstance(entries, Mapping):
        raise ConfigError(f"{path}: [waivers] must be a table of case-id globs, got {entries!r}")
    waivers = parse_waivers(entries, f"{path} [waivers]", skippable=skippable)
    templates = data.get("expectations", {}).get("case_ids", {})
    if not isinstance(templates, Mapping) or not all(
            isinstance(value, str) and "{key}" in value for value in templates.values()):
        raise ConfigError(f"{path}: [expectations] case_ids must map key prefixes to case-id globs "
                          f"holding {{key}}, got {templates!r}")
    return ExpectationsFile(path, ("waivers",), waivers, {key: _case_id_glob(key, templates) for key in waivers})


def pyproject_expectations(pyproject: Path, waivers: Mapping[str, Waiver]) -> ExpectationsFile:
    """``[tool.mluverify.waivers]`` of ``pyproject`` (already parsed into ``waivers``): its keys
    are case-id globs."""
    return ExpectationsFile(Path(pyproject), ("tool", "mluverify", "waivers"), waivers,
                            {key: key for key in waivers})


def _case_id_glob(key: str, templates: Mapping[str, str]) -> str:
    prefix = max((prefix for prefix in templates if key.startswith(prefix)), key=len, default=None)
    return key if prefix is None else templates[prefix].replace("{key}", key[len(prefix):])


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


# The waivers of the compiled targets' known deviations: one file per compiler, beside its
# reproducers (reports/inductor/waivers.toml, reports/tvm/waivers.toml, ...), relative to the
# rootdir. Their keys name the target (``*[tvm:cpu-*]``), so the files apply together.
COMPILER_WAIVERS_GLOB = "reports/*/waivers.toml"


def compiler_waiver_files(root: Path) -> list[Path]:
    """The compiled targets' waiver files under the project root ``root``."""
    return sorted(Path(root).glob(COMPILER_WAIVERS_GLOB))


def load_waivers(path: Path, *, skippable: bool = False) -> dict[str, Waiver]:
    """The waivers of the expectations file ``path`` (``load_expectations``), keyed as written;
    none when the file does not exist."""
    return dict(load_expectations(path, skippable=skippable).waivers)
