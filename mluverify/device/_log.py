"""The device's logger, honouring Cambricon's ``TORCH_MIN_CNLOG_LEVEL``.

-1 DEBUG, 0 INFO, 1 WARNING (default), 2 ERROR, 3 FATAL; read when the device is imported and
again by ``apply_log_level()``. Setting the variable asks for the device's log on stderr, as
torch_mlu prints it: the logger ``mluverify.device`` (and its children, e.g. the fusion
compiler's ``mluverify.device.fusion``) then gets its own handler at that level, and stops
propagating so an application's root handler does not print each line twice. Unset, the logger
has no handler: Python's default shows warnings and above, an application's logging config
decides.
"""
from __future__ import annotations

import logging
import os
import sys

ENV_VAR = "TORCH_MIN_CNLOG_LEVEL"
LEVELS = {-1: logging.DEBUG, 0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.CRITICAL}
DEFAULT_LEVEL = 1
HANDLER_NAME = "mluverify-cnlog"

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


class _StderrHandler(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment (pytest's capture, for one, replaces it)."""

    def __init__(self) -> None:
        super().__init__()
        self.set_name(HANDLER_NAME)
        self.setFormatter(logging.Formatter("[CNLOG %(levelname)s] %(name)s: %(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # StreamHandler.__init__ assigns one; stderr is looked up
        pass


def apply_log_level() -> None:
    """Set the device logger's level from ``TORCH_MIN_CNLOG_LEVEL``, with a stderr handler while
    the variable is set."""
    text = os.environ.get(ENV_VAR)
    logger.setLevel(parse_level(text))
    ours = [handler for handler in logger.handlers if handler.get_name() == HANDLER_NAME]
    if text is None or text.strip() == "":
        for handler in ours:
            logger.removeHandler(handler)
        logger.propagate = True
        return
    if not ours:
        logger.addHandler(_StderrHandler())
    logger.propagate = False
