"""The device's process settings: environment variable first, then ``[tool.mluverify]``, then the default.

Read once, when ``mluverify.device`` is imported (the card count cannot change afterwards).
``[tool.mluverify]`` comes from the nearest ``pyproject.toml`` at or above the working directory.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Mapping

from mluverify.core.config import FALLBACK_RULES, Settings, load_settings
from mluverify.errors import InvalidArgument, valid_choice

CARDS_ENV = "MLUVERIFY_DEVICE_COUNT"
FALLBACK_ENV = "MLUVERIFY_FALLBACK"


def nearest_pyproject(start: Path | None = None) -> Path | None:
    """The first ``pyproject.toml`` in ``start`` (default: the working directory) or above it."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def project_settings() -> Settings:
    """``[tool.mluverify]`` of the nearest pyproject.toml (read once per process)."""
    return load_settings(nearest_pyproject())


def card_count(env: Mapping[str, str] | None = None, settings: Settings | None = None) -> int:
    """How many emulated cards: ``MLUVERIFY_DEVICE_COUNT``, else ``device_count``, else 1."""
    env = os.environ if env is None else env
    text = env.get(CARDS_ENV, "").strip()
    if not text:
        return (settings or project_settings()).device_count
    try:
        cards = int(text)
    except ValueError:
        cards = 0
    if cards < 1:
        raise InvalidArgument(f"{CARDS_ENV}={text!r} must be a whole number of cards >= 1, e.g. {CARDS_ENV}=2")
    return cards


def fallback_rule(env: Mapping[str, str] | None = None, settings: Settings | None = None) -> str:
    """The default fallback rule: ``MLUVERIFY_FALLBACK``, else ``fallback``, else ``"cpu"``."""
    env = os.environ if env is None else env
    text = env.get(FALLBACK_ENV, "").strip()
    if not text:
        return (settings or project_settings()).fallback
    if text not in FALLBACK_RULES:
        raise valid_choice(FALLBACK_ENV, text, FALLBACK_RULES)
    return text
