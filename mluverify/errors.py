"""Every error mluverify raises on purpose, in one place."""
from __future__ import annotations


class MluverifyError(Exception):
    """Base of every error raised on purpose by mluverify."""


class InvalidArgument(MluverifyError, ValueError, TypeError):
    """An argument, option or configuration value is not one mluverify accepts.

    Messages name the argument, the value given and what would be accepted.
    """


class ConfigError(InvalidArgument):
    """``[tool.mluverify]`` (or a ``--mlu-*`` option) is malformed."""


class PluginError(MluverifyError):
    """A plugin failed while mluverify called one of its hooks; names plugin and hook."""


class RecordsError(MluverifyError):
    """A records file or report directory is missing, corrupt, foreign or unwritable."""


def valid_choice(what: str, value: object, valid: "list[str] | tuple[str, ...] | set[str]") -> InvalidArgument:
    """Build the error for a value that is not one of ``valid``, listing the valid ones."""
    listed = ", ".join(repr(v) for v in sorted(valid))
    return InvalidArgument(f"unknown {what} {value!r}; valid: {listed}")


class BackendError(MluverifyError):
    """A back end could not run a case (e.g. its compiler failed); names the case and the cause."""


class Unsupported(MluverifyError):
    """A target does not run a case as the case asks (a precision it does not compute, a
    quantization it would not make): the case is skipped with the reason, and nothing is recorded
    for it, so no record claims what did not happen."""
