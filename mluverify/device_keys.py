"""The emulated device's keys of ``[tool.mluverify]``: ``device_count`` and ``fallback``.

Ground level (the standard library and ``mluverify.errors`` only): the core's settings loader
checks them at start-up and the device reads them when it loads, by these same rules, without
the device importing the core. ``MLUVERIFY_DEVICE_COUNT`` / ``MLUVERIFY_FALLBACK`` override
them (``mluverify/device/_config.py``).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mluverify.errors import ConfigError

# How the emulated MLU treats ops it cannot run (mluverify/device/_fallback.py, docs/device.md).
FALLBACK_RULES = ("cpu", "seed")


@dataclass(frozen=True)
class DeviceKeys:
    """``device_count``: emulated MLU cards; ``fallback``: one of ``FALLBACK_RULES``."""

    device_count: int = 1
    fallback: str = "cpu"


def parse_device_keys(table: Mapping[str, Any], source: str = "[tool.mluverify]") -> DeviceKeys:
    """The device's keys of a ``[tool.mluverify]`` table (other keys are the core's); a
    ConfigError names the key and ``source``."""
    defaults = DeviceKeys()
    count = table.get("device_count", defaults.device_count)
    if not isinstance(count, int) or isinstance(count, bool):
        raise ConfigError(f"{source}: [tool.mluverify] device_count = {count!r} has the wrong type")
    if count < 1:
        raise ConfigError(f"{source}: [tool.mluverify] device_count = {count} must be >= 1")
    rule = table.get("fallback", defaults.fallback)
    if not isinstance(rule, str):
        raise ConfigError(f"{source}: [tool.mluverify] fallback = {rule!r} has the wrong type")
    if rule not in FALLBACK_RULES:
        raise ConfigError(f"{source}: [tool.mluverify] fallback = {rule!r}; valid: "
                          f"{', '.join(map(repr, FALLBACK_RULES))}")
    return DeviceKeys(count, rule)


def tool_table(pyproject: Path | None) -> Mapping[str, Any]:
    """``[tool.mluverify]`` of ``pyproject`` (empty when the file or the table is missing);
    invalid TOML is a ConfigError naming the file."""
    if pyproject is None or not Path(pyproject).is_file():
        return {}
    try:
        data = tomllib.loads(Path(pyproject).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject} is not valid TOML: {exc}") from None
    return data.get("tool", {}).get("mluverify", {})
