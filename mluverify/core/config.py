"""``[tool.mluverify]``: project defaults, read once from pyproject.toml and validated up front."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from mluverify.judge import GOLDEN_RULES, GoldenRule, ToleranceTable, parse_golden_rules
from mluverify.core.expectations import Waiver, parse_waivers
from mluverify.core.status import PROVENANCE_STATUSES
from mluverify.device_keys import parse_device_keys, tool_table
from mluverify.errors import ConfigError
from mluverify.project import find_rootdir, pyproject_of

# The bounds of the numeric keys (low, high; None: unbounded), shared by the options that override them.
NUMBER_BOUNDS: Mapping[str, tuple[float, float | None]] = {
    "regress_factor": (1.0, None), "noise_floor": (0.0, None), "determinism_share": (0.0, 1.0),
    "spread_sigmas": (0.0, None)}

KNOWN_KEYS = {"targets", "report_dir", "regress_factor", "noise_floor", "tolerances", "waivers",
              "allow", "skip", "core_versions", "determinism_share", "golden", "device_count", "fallback",
              "gate_fail_on_stale", "spread_sigmas"}


@dataclass(frozen=True)
class Settings:
    """Validated ``[tool.mluverify]`` settings with their defaults (the one place they live).

    ``allow``: statuses admitted (the test passes, the gate accepts; still counted apart);
    ``skip``: statuses reported as skips (the gate still fails on them unless allowed);
    ``core_versions``: device variants each target runs on (empty: each back end's default);
    ``determinism_share``: the share of cases run twice on the device (0 to 1);
    ``golden``: the golden policy's k and floor per dtype;
    ``device_count``: emulated MLU cards (``MLUVERIFY_DEVICE_COUNT`` overrides);
    ``fallback``: the emulated MLU's fallback rule, one of ``mluverify.device_keys.FALLBACK_RULES`` (``MLUVERIFY_FALLBACK`` overrides);
    ``gate_fail_on_stale``: the gate fails on a stale ``waivers`` entry (``mluverify.report.gate``);
    ``spread_sigmas``: with a baseline measured over several runs, a case is worsened above
    ``mean + spread_sigmas x spread`` where that is wider than ``regress_factor`` (``mluverify.report.spread``).
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
    gate_fail_on_stale: bool = False
    spread_sigmas: float = 3.0


def load_settings(pyproject: Path | None) -> Settings:
    """Read ``[tool.mluverify]`` from ``pyproject`` (missing file or table: the defaults)."""
    return parse_settings(tool_table(pyproject), source=str(pyproject))


def project_settings(args: Iterable[str] = (), invocation_dir: Path | None = None) -> Settings:
    """``[tool.mluverify]`` of the project pytest would root at for ``args`` (test paths) run
    from ``invocation_dir`` (default: the working directory); see ``mluverify.project``."""
    return load_settings(pyproject_of(find_rootdir(args, invocation_dir)))


def parse_settings(table: Mapping[str, Any], source: str = "[tool.mluverify]") -> Settings:
    """Validate a ``[tool.mluverify]`` table; ConfigError names the key and the file."""
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.mluverify] key(s) {sorted(unknown)}; valid: {sorted(KNOWN_KEYS)}")
    defaults = Settings()
    return Settings(
        targets=_strings(table, "targets", defaults.targets, source, non_empty=True),
        report_dir=_typed(table, "report_dir", str, defaults.report_dir, source),
        regress_factor=_number(table, "regress_factor", defaults.regress_factor, source),
        noise_floor=_number(table, "noise_floor", defaults.noise_floor, source),
        tolerances=ToleranceTable(_typed(table, "tolerances", dict, {}, source), source),
        waivers=parse_waivers(_typed(table, "waivers", dict, {}, source), source),
        allow=_statuses(table, "allow", source),
        skip=_statuses(table, "skip", source),
        core_versions=_strings(table, "core_versions", defaults.core_versions, source),
        determinism_share=_number(table, "determinism_share", defaults.determinism_share, source),
        golden=parse_golden_rules(_typed(table, "golden", dict, {}, f"{source}.golden"), f"{source}.golden"),
        **vars(parse_device_keys(table, source)),
        gate_fail_on_stale=_flag(table, "gate_fail_on_stale", defaults.gate_fail_on_stale, source),
        spread_sigmas=_number(table, "spread_sigmas", defaults.spread_sigmas, source),
    )


def _typed(table: Mapping[str, Any], key: str, kind, default, source: str):
    value = table.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value!r} has the wrong type")
    return value


def _flag(table: Mapping[str, Any], key: str, default: bool, source: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value!r} must be true or false")
    return value


def bounds_problem(value: float, key: str) -> str | None:
    """What is wrong with ``value`` for the numeric ``[tool.mluverify] key`` (or an option that
    overrides it), e.g. ``"must be >= 1"``; None when it lies within the key's bounds."""
    low, high = NUMBER_BOUNDS[key]
    return out_of_bounds(value, low, high)


def out_of_bounds(value: float, low: float, high: float | None = None) -> str | None:
    """``"must be ..."`` when ``value`` lies outside ``[low, high]`` (``high`` None: no upper
    bound; NaN is outside), else None."""
    if value >= low and (high is None or value <= high):
        return None
    return f"must be >= {low:g}" if high is None else f"must be between {low:g} and {high:g}"


def _number(table: Mapping[str, Any], key: str, default: float, source: str) -> float:
    value = float(_typed(table, key, (int, float), default, source))
    problem = bounds_problem(value, key)
    if problem:
        raise ConfigError(f"{source}: [tool.mluverify] {key} = {value:g} {problem}")
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
