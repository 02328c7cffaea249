"""Whether a run reached its end: a killed, interrupted or stopped run is reported as
incomplete on every page and line, is refused by the gate and by ``baseline update``, and never
reads as passed.

A run states it in ``run.json`` (``RunCompleteness.as_metadata``): when the run directory is
claimed, ``complete: false`` with the number of tests collected, so a run killed at any later
point (``kill -9``, a lost machine) says so by itself; at its end, ``complete`` with how many of
those tests ran and, when not all did, why. Runs written before this existed hold no
``complete`` key: they count as complete unless marked ``interrupted``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    import pandas as pd

KILLED = "killed: the run ended before it finished (no end was recorded)"
INTERRUPTED = "interrupted (Ctrl-C or a signal stopped pytest)"
# The keys of run.json a completeness owns (``RunCompleteness.as_metadata``).
KEYS = ("complete", "tests_collected", "tests_run", "incomplete_reason")


@dataclass(frozen=True)
class RunCompleteness:
    """``complete``, and for an incomplete run ``reason``; ``tests_run`` of ``tests_collected``
    (None where unknown)."""

    complete: bool
    reason: str = ""
    tests_run: int | None = None
    tests_collected: int | None = None

    @property
    def headline(self) -> str:
        """``incomplete: 18 of 40 tests (interrupted ...)``, or ``""`` for a complete run."""
        return f"incomplete: {self.detail}" if not self.complete else ""

    @property
    def detail(self) -> str:
        """What ran and why not all of it: ``18 of 40 tests (interrupted ...)``."""
        counted = "" if self.tests_run is None else (
            f"{self.tests_run} of {self.tests_collected} tests " if self.tests_collected is not None
            else f"{self.tests_run} tests ")
        return f"{counted}({self.reason})"

    def as_metadata(self) -> dict[str, Any]:
        """The keys (of ``KEYS``) this writes into ``run.json``."""
        fields = {"complete": self.complete, "tests_collected": self.tests_collected, "tests_run": self.tests_run,
                  "incomplete_reason": self.reason}
        return {key: value for key, value in fields.items() if value is not None and value != ""}

    def stated_in(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """``metadata`` (a ``run.json``) with this completeness in place of the one it stated:
        a run that reached its end keeps no reason its claim gave for being incomplete."""
        return {**{key: value for key, value in metadata.items() if key not in KEYS}, **self.as_metadata()}


def at_claim(tests_collected: int) -> RunCompleteness:
    """What a run says of itself until its end is recorded."""
    return RunCompleteness(False, KILLED, tests_collected=tests_collected)


def at_end(tests_run: int, tests_collected: int, interrupted: bool) -> RunCompleteness:
    """How a run that reached pytest's end finished: every collected test ran, or why not."""
    if interrupted:
        return RunCompleteness(False, INTERRUPTED, tests_run, tests_collected)
    if tests_run < tests_collected:
        return RunCompleteness(False, "stopped early (-x, --maxfail, --exitfirst or a lost worker)",
                               tests_run, tests_collected)
    return RunCompleteness(True, tests_run=tests_run, tests_collected=tests_collected)


def completeness_of(metadata: Mapping[str, Any], frame: "pd.DataFrame | None" = None) -> RunCompleteness:
    """A run's completeness from its ``run.json``; where the run did not record how many tests
    ran (it was killed), the tests its records name, from ``frame``."""
    if "complete" not in metadata:
        interrupted = bool(metadata.get("interrupted"))
        return RunCompleteness(not interrupted, INTERRUPTED if interrupted else "")
    tests_run = metadata.get("tests_run")
    if tests_run is None and frame is not None and not metadata["complete"]:
        tests_run = tests_recorded(frame["case_id"])
    return RunCompleteness(bool(metadata["complete"]), metadata.get("incomplete_reason", ""), tests_run,
                           metadata.get("tests_collected"))


def tests_recorded(case_ids: Iterable[str]) -> int:
    """How many tests the case ids belong to (``test[x]#2`` is the second case of ``test[x]``)."""
    return len({str(case_id).split("#", 1)[0] for case_id in case_ids})


def merged(parts: Iterable[RunCompleteness]) -> RunCompleteness:
    """The completeness of runs merged into one (CI slices): complete only if each was."""
    parts = list(parts)
    incomplete = [part for part in parts if not part.complete]
    if not incomplete:
        return RunCompleteness(True)
    return RunCompleteness(False, f"{len(incomplete)} of {len(parts)} merged runs incomplete, the first: "
                                  f"{incomplete[0].detail}")
