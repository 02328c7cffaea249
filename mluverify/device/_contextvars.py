"""Settings with a process default and per-block overrides, as ``contextvars``.

A block's value (``with``) lives in a ContextVar, so it follows the code that set it into
threads that copy the context (the device's queue workers) and never leaks into other
threads; the process default is what code outside every block sees (autograd's device thread
included).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def block(var: contextvars.ContextVar[T], value: T) -> Iterator[T]:
    """Give ``var`` the value ``value`` for the ``with`` block, then restore it."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
