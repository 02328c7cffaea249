"""A fuzzing campaign: hypothesis searches, one per target and seed, each shrinking what it finds.

For each seed (``seed``, ``seed + 1``, ... until the budget is spent) and each target, hypothesis
draws up to ``chunk`` programs with that seed and judges each on the target
(``differential.judge``). The first finding stops the search and is shrunk: hypothesis re-draws
smaller programs and simpler inputs while the target still fails the same way, within
``shrink_runs`` new runs and ``shrink_seconds`` (runs it has seen are answered from memory, so
the minimal example can always be replayed). The graph passes of ``mluverify.fuzz.reduce`` then
remove the nodes hypothesis's choice sequence could not, within the same bounds. With
``shrink_runs`` 0 a finding is kept as drawn: hypothesis's shrinker re-draws inputs element by
element even for the examples it is then refused, which on inputs of hundreds of elements
takes tens of seconds whatever the bound. A program that
a kept finding explains (same target and kind, its ops a subsequence of the program's) does not
stop a search, so each search finds something new. A campaign split over machines uses disjoint
seed ranges and merges the corpora afterwards.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, seed as hypothesis_seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky, Unsatisfiable

from mluverify.errors import InvalidArgument
from mluverify.fuzz.corpus import Finding
from mluverify.fuzz.coverage import Coverage, Steering, count_program
from mluverify.fuzz.differential import DEVIATION, PASS, REFERENCE, Judgement, Runner, judge
from mluverify.fuzz.generate import defined_cases
from mluverify.fuzz.ops import OPS, OpSpec
from mluverify.fuzz.program import Program
from mluverify.fuzz.reduce import reduce_program

DEFAULT_CHUNK = 20
DEFAULT_SHRINK_RUNS = 200
DEFAULT_SHRINK_SECONDS = 180.0


@dataclass(frozen=True)
class Budget:
    """Programs per target, or wall-clock seconds for the whole campaign."""

    programs: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """``"200"``: 200 programs per target; ``"600s"``: 600 seconds. <= 0: InvalidArgument."""
        raw = text.strip()
        try:
            value = float(raw[:-1]) if raw.endswith("s") else int(raw)
        except ValueError:
            raise InvalidArgument(f"budget {text!r}: write a number of programs (200) or of seconds "
                                  f"(600s)") from None
        if not value > 0:
            raise InvalidArgument(f"budget {text!r} must be > 0")
        return cls(seconds=value) if raw.endswith("s") else cls(programs=int(value))


@dataclass
class TargetStats:
    """What one target's searches did: programs judged (shrinking not counted), wall seconds,
    judgements by kind, and torchfuzz's oracle on the same programs."""

    programs: int = 0
    seconds: float = 0.0
    kinds: Counter = field(default_factory=Counter)
    torchfuzz_fails: int = 0
    torchfuzz_misses: int = 0          # our deviations that its sum oracle passes
    torchfuzz_cleared: int = 0         # its failures the golden rule puts on the CPU reference
    torchfuzz_within_policy: int = 0   # its failures within the mode's policy

    @property
    def per_hour(self) -> float:
        return self.programs / self.seconds * 3600 if self.seconds else 0.0

    def count(self, judgement: Judgement) -> None:
        self.programs += 1
        self.kinds[judgement.kind] += 1
        self.torchfuzz_fails += judgement.torchfuzz_fails
        self.torchfuzz_misses += judgement.kind == DEVIATION and not judgement.torchfuzz_fails
        self.torchfuzz_cleared += judgement.kind == REFERENCE and judgement.torchfuzz_fails
        self.torchfuzz_within_policy += judgement.kind == PASS and judgement.torchfuzz_fails


class _Found(Exception):
    """Raised in a hypothesis example to make it a failure (and shrink it)."""

    def __init__(self, judgement: Judgement, program: Program, inputs: list) -> None:
        super().__init__(f"{judgement.kind} on {judgement.target}: {judgement.reason}")
        self.judgement, self.program, self.inputs = judgement, program, inputs


def _is_subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    remaining = iter(long)
    return all(op in remaining for op in short)


@dataclass
class Campaign:
    """Searches ``targets`` with programs of ``ops``; ``runner`` runs a program on a target,
    ``policies`` maps each target to its mode's tolerance policy, ``culprit`` names the op to
    blame for a shrunk deviation (a finding's signature). ``on_finding`` is called with
    each new finding (e.g. ``corpus.keep``); ``known`` holds findings kept before (a corpus).
    ``coverage``: per target, the (op, dtype) counts judged before (a corpus's), which steer
    each search's draws and grow as it judges; ``judged`` holds this campaign's own counts,
    handed to ``on_coverage`` after each search."""

    targets: Sequence[str]
    runner: Runner
    policies: dict[str, str]
    ops: Sequence[OpSpec] = OPS
    chunk: int = DEFAULT_CHUNK
    shrink_runs: int = DEFAULT_SHRINK_RUNS
    shrink_seconds: float = DEFAULT_SHRINK_SECONDS
    on_finding: Callable[[Finding], Any] = lambda finding: None
    # The op to blame for a deviation (``Finding.culprit``), None where it cannot be told.
    culprit: Callable[[Program, Sequence[Any], str], str | None] = lambda program, inputs, target: None
    known: list[Finding] = field(default_factory=list)
    coverage: Coverage = field(default_factory=dict)
    on_coverage: Callable[[Coverage], Any] = lambda judged: None
    stats: dict[str, TargetStats] = field(init=False)
    judged: Coverage = field(init=False)
    seeds: list[int] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.stats = {target: TargetStats() for target in self.targets}
        self.judged = {target: Counter() for target in self.targets}
        self.coverage = {target: Counter(self.coverage.get(target, {})) for target in self.targets}

    def run(self, first_seed: int, budget: Budget) -> list[Finding]:
        """Search seed after seed until ``budget`` is spent; returns the new findings."""
        deadline = time.monotonic() + budget.seconds if budget.seconds else None
        found: list[Finding] = []
        seed = first_seed
        while True:
            pending = [t for t in self.targets if budget.programs is None or self.stats[t].programs < budget.programs]
            if not pending or (deadline is not None and time.monotonic() >= deadline):
                return found
            self.seeds.append(seed)
            before = sum(stats.programs for stats in self.stats.values())
            for target in pending:
                left = None if budget.programs is None else budget.programs - self.stats[target].programs
                finding = self.search(target, seed, min(self.chunk, left or self.chunk), deadline)
                if finding is not None:
                    found.append(finding)
            if sum(stats.programs for stats in self.stats.values()) == before:
                return found  # no valid program drawn for any target: more seeds would not either
            seed += 1

    def explained(self, judgement: Judgement, program: Program) -> bool:
        """A kept finding of this target and kind whose ops all occur, in order, in ``program``."""
        return any(k.judgement.target == judgement.target and k.judgement.kind == judgement.kind
                   and _is_subsequence(k.program.ops, program.ops) for k in self.known)

    def search(self, target: str, seed: int, examples: int, deadline: float | None = None) -> Finding | None:
        """One hypothesis search of ``examples`` programs on ``target``; its shrunk finding."""
        memo: dict[str, Judgement] = {}
        stats = self.stats[target]
        # Fixed for the search: hypothesis replays its draws while shrinking.
        steering = Steering(dict(self.coverage[target]))
        shrinking: dict[str, Any] = {"runs": 0, "on": False, "until": 0.0, "kind": ""}

        def judged(program: Program, inputs: list) -> Judgement:
            key = json.dumps([program.to_json(), [x.tolist() for x in inputs]])
            if key in memo:
                return memo[key]
            if shrinking["on"]:
                shrinking["runs"] += 1
                if shrinking["runs"] > self.shrink_runs or time.monotonic() > shrinking["until"]:
                    reject()
            elif deadline is not None and time.monotonic() >= deadline:
                reject()
            memo[key] = judge(program, inputs, target, self.runner, self.policies[target])
            if not shrinking["on"]:
                stats.count(memo[key])
                count_program(self.coverage[target], program)
                count_program(self.judged[target], program)
            return memo[key]

        @hypothesis_seed(seed)
        @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
                  suppress_health_check=list(HealthCheck),
                  phases=(Phase.generate, Phase.shrink) if self.shrink_runs else (Phase.generate,),
                  report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False)
        @given(st.data())
        def body(data: st.DataObject) -> None:
            if not shrinking["on"] and deadline is not None and time.monotonic() >= deadline:
                reject()
            program, inputs = data.draw(defined_cases(self.ops, steering=steering))
            judgement = judged(program, inputs)
            if not judgement.is_finding or self.explained(judgement, program):
                return
            if not shrinking["on"]:
                shrinking["on"], shrinking["until"] = True, time.monotonic() + self.shrink_seconds
                shrinking["kind"] = judgement.kind
            if judgement.kind == shrinking["kind"]:  # shrink the finding made, not another kind
                raise _Found(judgement, program, inputs)

        started = time.monotonic()
        try:
            body()
        except _Found as found:
            finding = self._reduced(Finding(found.judgement, found.program, tuple(found.inputs), seed))
            self.known.append(finding)
            self.on_finding(finding)
            return finding
        except (Unsatisfiable, Flaky):  # nothing valid drawn in time / a finding that did not reproduce
            return None
        finally:
            stats.seconds += time.monotonic() - started
            self.on_coverage(self.judged)
        return None

    def _reduced(self, finding: Finding) -> Finding:
        """``finding`` after the graph passes of ``mluverify.fuzz.reduce``."""
        target, kind = finding.judgement.target, finding.judgement.kind
        last = {"judgement": finding.judgement}
        until = time.monotonic() + self.shrink_seconds

        def still_fails(program: Program, inputs: list) -> bool:
            if time.monotonic() > until:
                return False
            judgement = judge(program, inputs, target, self.runner, self.policies[target])
            if judgement.kind != kind:
                return False
            last["judgement"] = judgement
            return True

        program, inputs = reduce_program(finding.program, finding.inputs, still_fails, self.shrink_runs)
        culprit = self.culprit(program, inputs, target) if kind == DEVIATION else None
        return Finding(last["judgement"], program, tuple(inputs), finding.seed, culprit=culprit)


__all__ = ["Budget", "Campaign", "TargetStats"]
