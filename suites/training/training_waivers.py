"""The training suites' known deviations (``waivers.toml`` beside this file) as pytest marks.

Keys are globs on a case name (``*`` and ``?`` only); each entry has a ``reason``, an expiry
date ``until`` (``YYYY-MM-DD``), after which the case fails again, and, when it excuses a value,
a ceiling ``max`` on the judged metric (carried by the mark). ``skip = true`` marks a case
that raises in the device itself: there is no verdict to waive, it is skipped with the reason.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from mluverify.core.expectations import Waiver, load_waivers, marker_fields, waiver_for

WAIVERS_FILE = Path(__file__).with_name("waivers.toml")


@lru_cache(maxsize=1)
def _waivers() -> dict[str, Waiver]:
    return load_waivers(WAIVERS_FILE, skippable=True)


def waiver_marks(case: str) -> list:
    """The first matching waiver of ``case`` as an ``mlu_waiver`` mark (or a skip), else none."""
    waiver = waiver_for(case, _waivers())
    if waiver is None:
        return []
    if waiver.skip:
        return [pytest.mark.skip(reason=f"{waiver.reason} (until {waiver.until})")]
    return [pytest.mark.mlu_waiver(waiver.reason, waiver.until, **marker_fields(waiver))]
