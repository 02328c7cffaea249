"""Option types for the sub-commands: an option is checked by the rules of the
``[tool.mluverify]`` key it overrides (``mluverify.core.config``), a bad value is a usage error
(argparse: exit 2, naming the option and the value)."""
from __future__ import annotations

import argparse
import math
from typing import Callable

from mluverify.core.config import bounds_problem, out_of_bounds


def key_number(key: str) -> Callable[[str], float]:
    """The type of an option that overrides the numeric ``[tool.mluverify] key``."""
    def parse(text: str) -> float:
        return _checked(text, bounds_problem(_float(text), key), f"as [tool.mluverify] {key}")
    return parse


def bounded_number(low: float, high: float | None = None) -> Callable[[str], float]:
    """The type of a numeric option that overrides no key: a finite number in ``[low, high]``."""
    def parse(text: str) -> float:
        value = _float(text)
        # no upper bound is no licence for inf: a factor of inf makes every result inf
        return _checked(text, "must be finite" if math.isinf(value) else out_of_bounds(value, low, high), "")
    return parse


def worker_count(text: str) -> int | str:
    """The type of ``--workers``: ``auto`` or a whole number >= 0 (0: no workers)."""
    if text == "auto":
        return text
    if not text.isdigit():  # a sign, a fraction or a word
        raise argparse.ArgumentTypeError(f"{text!r} is no worker count: pass a number >= 0 (0: none) or 'auto' "
                                         f"(all cores)")
    return int(text)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _checked(text: str, problem: str | None, rule: str) -> float:
    if problem:
        raise argparse.ArgumentTypeError(f"{text} {problem}" + (f" ({rule})" if rule else ""))
    return float(text)
