"""The device's process settings: environment variable first, then ``[tool.mluverify]``, then the default.

Read once, when ``mluverify.device`` is imported (the card count cannot change afterwards).
``[tool.mluverify]`` comes from the ``pyproject.toml`` of the project pytest would root at when
run from the working directory (``mluverify.project.find_rootdir``).
"""
from __future__ import annotations

import functools
import os
from typing import Mapping

from mluverify.device_keys import FALLBACK_RULES, DeviceKeys, parse_device_keys, tool_table
from mluverify.errors import InvalidArgument, valid_choice
from mluverify.project import find_rootdir, pyproject_of

CARDS_ENV = "MLUVERIFY_DEVICE_COUNT"
FALLBACK_ENV = "MLUVERIFY_FALLBACK"


@functools.cache
def project_keys() -> DeviceKeys:
    """The device's keys of ``[tool.mluverify]`` in the working directory's project (read once
    per process; the other keys are the core's to check)."""
    pyproject = pyproject_of(find_rootdir())
    return parse_device_keys(tool_table(pyproject), source=str(pyproject))


def card_count(env: Mapping[str, str] | None = None, settings: DeviceKeys | None = None) -> int:
    """How many emulated cards: ``MLUVERIFY_DEVICE_COUNT``, else ``device_count``, else 1."""
    env = os.environ if env is None else env
    text = env.get(CARDS_ENV, "").strip()
    if not text:
        return (settings or project_keys()).device_count
    try:
        cards = int(text)
    except ValueError:
        cards = 0
    if cards < 1:
        raise InvalidArgument(f"{CARDS_ENV}={text!r} must be a whole number of cards >= 1, e.g. {CARDS_ENV}=2")
    return cards


def fallback_rule(env: Mapping[str, str] | None = None, settings: DeviceKeys | None = None) -> str:
    """The default fallback rule: ``MLUVERIFY_FALLBACK``, else ``fallback``, else ``"cpu"``."""
    env = os.environ if env is None else env
    text = env.get(FALLBACK_ENV, "").strip()
    if not text:
        return (settings or project_keys()).fallback
    if text not in FALLBACK_RULES:
        raise valid_choice(FALLBACK_ENV, text, FALLBACK_RULES)
    return text
