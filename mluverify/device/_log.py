"""The device's logger, honouring Cambricon's ``TORCH_MIN_CNLOG_LEVEL``.

-1 DEBUG, 0 INFO, 1 WARNING (default), 2 ERROR, 3 FATAL; read when the device is imported and
again by ``apply_log_level()``.
"""
from __future__ import annotations

import logging
import os

ENV_VAR = "TORCH_MIN_CNLOG_LEVEL"
LEVELS = {-1: logging.DEBUG, 0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.CRITICAL}
DEFAULT_LEVEL = 1

logger = logging.getLogger("mluverify.device")


def parse_level(text: str | None) -> int:
    """The logging level for a ``TORCH_MIN_CNLOG_LEVEL`` value; ValueError lists valid values."""
    if text is None or text.strip() == "":
        return LEVELS[DEFAULT_LEVEL]
    try:
        return LEVELS[int(text)]
    except (ValueError, KeyError):
        valid = ", ".join(f"{k} ({logging.getLevelName(v)})" for k, v in LEVELS.items())
        raise ValueError(f"{ENV_VAR}={text!r} is not a valid log level; valid: {valid}") from None


def apply_log_level() -> None:
    """Set the device logger's level from ``TORCH_MIN_CNLOG_LEVEL``."""
    logger.setLevel(parse_level(os.environ.get(ENV_VAR)))
