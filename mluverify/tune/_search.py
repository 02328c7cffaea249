"""The search over knobs: which layers / ops to move up their ladder so a model meets its bound.

A *knob* is one layer's precision (int8 -> int16 -> float; 8 -> 16 -> 31 bits in training) or
one op's place (fused -> CNNL). A configuration says how many rungs each changed knob is
raised; a *trial* evaluates one configuration (cached: the same configuration is never run or
counted twice). Every strategy spends at most ``budget`` trials and starts alike:

1. the configuration as given (no change, or the user's starting one): within the bound ->
   nothing to do;
2. every knob at its next rung, else every knob at its top rung: outside the bound -> no
   setting meets it (the best found is reported); else the level that passed is the rung
   changes are made at.

Then ``attribution`` ranks knobs by their error (largest first), raises as many top-ranked
ones as the scores predict are needed, gallops and bisects the smallest passing prefix, and
prunes the changes the scores say may not be needed, in groups; ``bisection``
(Polygraphy's ``debug precision``) bisects the model-order prefix, then its start, with no
ranking and no pruning; ``greedy`` (Neural Compressor's fallback) raises knobs one at a time in
model order until the bound holds.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from mluverify.errors import InvalidArgument

STRATEGIES = ("attribution", "bisection", "greedy")
# How a search ended.
WITHIN_BOUND, TUNED, IMPOSSIBLE, BUDGET_SPENT = "within-bound", "tuned", "impossible", "budget-spent"


@dataclass(frozen=True)
class Knob:
    """One setting the search may change: ``kind`` ``layer`` (precision) or ``op`` (fusion),
    the layer's qualified name or the op's full name, its ladder (first rung: as deployed)."""

    kind: str
    name: str
    ladder: tuple

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


# A configuration: knob key -> rungs raised (> 0); knobs not named stay at rung 0.
Config = Mapping[str, int]
# The attribution: rung -> (knob key -> the error the output sees with that knob alone at that rung).
Attribute = Callable[[int], Mapping[str, float]]


@dataclass(frozen=True)
class Outcome:
    """What one evaluation gave: the judged metric and whether it is within the bound."""

    metric: float
    passed: bool


@dataclass(frozen=True)
class Trial:
    """One evaluated configuration, in the order the search ran it."""

    index: int
    phase: str
    changes: dict[str, str]  # knob key -> the rung it runs at (only changed knobs)
    metric: float
    passed: bool
    seconds: float


@dataclass
class SearchResult:
    """The search's answer: ``status`` (within-bound, tuned, impossible, budget-spent), the
    configuration chosen (``changes``: knob key -> rung; empty when nothing needs to change),
    its metric, the trials run and the wall time."""

    strategy: str
    status: str
    changes: dict[str, str]
    metric: float
    passed: bool
    bound: float
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0


def judged(verdict: Any, bound: float) -> Outcome:
    """A judge's verdict as an outcome. A rel_mse Cambricon's eps rule zeroed (an output of
    near-zero energy, e.g. a randomly initialised MobileNetV3's ~1e-9 logits) says nothing about
    which layer to change: the raw rel_mse is used instead."""
    if verdict.eps_zeroed:
        raw = float(verdict.diagnostics["raw_rel_mse"])
        return Outcome(raw, raw <= bound)
    return Outcome(float(verdict.value), bool(verdict.passed))


class BudgetSpent(Exception):
    """Raised inside a strategy when the next trial would exceed the budget."""


class Trials:
    """Runs configurations through ``evaluate`` within ``budget``, caching and recording them."""

    def __init__(self, knobs: Sequence[Knob], evaluate: Callable[[Config], Outcome], budget: int,
                 bound: float, predict: bool = True) -> None:
        self.knobs = {knob.key: knob for knob in knobs}
        self.bound = bound
        self.predict = predict
        self.evaluate = evaluate
        self.budget = budget
        self.cache: dict[frozenset, Outcome] = {}
        self.trials: list[Trial] = []

    def run(self, config: Config, phase: str) -> bool:
        """Whether ``config`` is within the bound (one trial unless already run)."""
        config = changed(config)
        key = frozenset(config.items())
        if key not in self.cache:
            if len(self.trials) >= self.budget:
                raise BudgetSpent
            started = time.perf_counter()
            outcome = self.evaluate(config)
            self.cache[key] = outcome
            self.trials.append(Trial(len(self.trials), phase, self.named(config), outcome.metric, outcome.passed,
                                     time.perf_counter() - started))
        return self.cache[key].passed

    def metric(self, config: Config) -> float:
        """The measured metric of a configuration already run."""
        return self.cache[frozenset(changed(config).items())].metric

    def named(self, config: Config) -> dict[str, str]:
        return {key: str(self.knobs[key].ladder[rung]) for key, rung in sorted(config.items()) if rung > 0}

    def best(self) -> tuple[Config, Outcome]:
        """The passing configuration with the fewest changes (then the fewest rungs raised, then
        the lowest metric), else the lowest metric."""
        def order(item):
            config, outcome = item
            changes, rungs = (len(config), sum(rung for _, rung in config)) if outcome.passed else (0, 0)
            return (not outcome.passed, changes, rungs, outcome.metric)
        key, outcome = min(self.cache.items(), key=order)
        return dict(key), outcome


def changed(config: Config) -> dict[str, int]:
    """``config`` without its knobs at rung 0 (the same setting, as the cache keys it)."""
    return {key: rung for key, rung in config.items() if rung > 0}


def raised(knobs: Sequence[Knob], level: int, base: Config) -> dict[str, int]:
    """``base`` with every knob of ``knobs`` at rung ``level`` (or its top, if lower)."""
    config = dict(base)
    for knob in knobs:
        config[knob.key] = max(config.get(knob.key, 0), min(level, len(knob.ladder) - 1))
    return config


def search(strategy: str, knobs: Sequence[Knob], evaluate: Callable[[Config], Outcome], *, bound: float,
           budget: int, attribute: Attribute | None = None, start: Config | None = None,
           predict: bool = True) -> SearchResult:
    """Find the fewest knob changes that bring the model within ``bound``, in ``budget`` trials.

    ``attribute(rung)``: knob key -> its error with that knob alone at ``rung`` (the
    attribution; rung 0 ranks, higher rungs predict which kept changes can be lowered), called
    only once the model as deployed is known to miss the bound; ``start``: a starting
    configuration; ``predict``: whether the scores are in the metric's units (rel_mse), so
    they may predict where the bound falls (else they only rank: the prefix search starts at
    one knob and pruning tries one change at a time).
    """
    if strategy not in STRATEGIES:
        raise InvalidArgument(f"unknown tuning strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    check_budget(budget)
    started = time.perf_counter()
    trials = Trials(knobs, evaluate, budget, bound, predict)
    try:
        status = _prelude_and_search(strategy, trials, list(knobs), dict(start or {}), attribute or no_scores)
    except BudgetSpent:
        status = BUDGET_SPENT
    config, outcome = trials.best()
    if status == WITHIN_BOUND:
        config, outcome = {}, trials.cache[frozenset()]
    if status == BUDGET_SPENT and outcome.passed:
        status = TUNED
    return SearchResult(strategy, status, trials.named(config), outcome.metric, outcome.passed, bound,
                        trials.trials, time.perf_counter() - started)


def check_budget(budget: object) -> int:
    """A trial budget is an integer >= 1."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidArgument(f"the trial budget must be an integer >= 1, got {budget!r}")
    return budget


def no_scores(rung: int) -> dict[str, float]:
    """The attribution of a strategy that uses none."""
    return {}


def _prelude_and_search(strategy: str, trials: Trials, knobs: list[Knob], start: Config,
                        attribute: Attribute) -> str:
    if trials.run({}, "as deployed"):
        return WITHIN_BOUND
    if start and trials.run(start, "starting config"):
        _prune(trials, start, attribute)
        return TUNED
    level = _passing_level(trials, knobs, start)
    if level is None:
        return IMPOSSIBLE
    {"attribution": _attribution, "bisection": _bisection, "greedy": _greedy}[strategy](
        trials, knobs, start, level, attribute)
    return TUNED


def _passing_level(trials: Trials, knobs: list[Knob], start: Config) -> int | None:
    """The lowest rung at which raising every knob meets the bound (None: not even the top, or
    nothing to raise)."""
    top = max((len(knob.ladder) for knob in knobs), default=1) - 1
    for level in range(1, top + 1):
        if trials.run(raised(knobs, level, start), f"all at rung {level}"):
            return level
    return None


def _smallest_passing_prefix(trials: Trials, ordered: list[Knob], level: int, base: Config, first: int,
                             phase: str) -> int:
    """The smallest k with ``ordered[:k]`` raised within the bound (the whole list is known to
    pass): gallop from ``first`` (up while it fails, down while it passes, the step doubling
    each time), then bisect the bracket found."""
    failing, passing = 0, len(ordered)
    k = max(1, min(first, passing))
    step = 1
    while failing < k < passing:
        if trials.run(raised(ordered[:k], level, base), phase):
            passing, k = k, k - step
        else:
            failing, k = k, k + step
        step *= 2
    return _bisect(lambda middle: trials.run(raised(ordered[:middle], level, base), phase), failing, passing)


def _attribution(trials: Trials, knobs: list[Knob], start: Config, level: int, attribute: Attribute) -> None:
    """Rank by own error, find the smallest passing top-k, prune, then lower rungs."""
    scores = attribute(0)
    ranked = sorted(knobs, key=lambda knob: -scores.get(knob.key, 0.0))  # stable: model order on ties
    first = _predicted_cut(ranked, scores, trials.bound) if trials.predict else 1
    k = _smallest_passing_prefix(trials, ranked, level, start, first, "ranked prefix")
    _prune(trials, raised(ranked[:k], level, start), attribute)


def _predicted_cut(ranked: list[Knob], scores: Mapping[str, float], bound: float) -> int:
    """The fewest top-ranked knobs to raise for the rest's error to be within ``bound``,
    predicted from the scores: independent errors add in energy (rel_mse is a square root), so
    the rest's ``sqrt(sum(score**2))`` must be within it. At least one."""
    energies = [scores.get(knob.key, 0.0) ** 2 for knob in ranked]
    return next((k for k in range(1, len(ranked) + 1) if math.sqrt(sum(energies[k:])) <= bound), len(ranked))


def _prune(trials: Trials, config: Config, attribute: Attribute) -> dict[str, int]:
    """Drop the changes the scores say may not be needed, then lower each kept one a rung
    (float -> int16, 31 -> 16 bits) where the scores say it may hold; both in groups
    (``_guided_moves``)."""
    scores = attribute(0)
    kept = _guided_moves(trials, dict(config), {key: (0, scores.get(key, 0.0)) for key in config}, "prune")
    lowerable = [key for key, rung in kept.items() if rung > 1]
    rung_scores = {rung: attribute(rung) for rung in {kept[key] - 1 for key in lowerable}}
    return _guided_moves(trials, kept, {key: (kept[key] - 1, rung_scores[kept[key] - 1].get(key, 0.0))
                                        for key in lowerable}, "lower rung")


def _guided_moves(trials: Trials, kept: dict[str, int], moves: Mapping[str, tuple[int, float]],
                  phase: str) -> dict[str, int]:
    """Apply as many ``moves`` (knob key -> (the rung it would go to, that knob's error there))
    as keep the bound. The scores predict a move's cost: errors add in energy, so a move takes
    the measured metric ``m`` to about ``sqrt(m**2 + error**2)``. Moves predicted to break the
    bound are not tried; the others are tried together, cheapest first, as many as the
    prediction allows, halving the group when it fails; a single move that fails is kept out.
    Without predictions (``trials.predict`` false), one move at a time, cheapest first."""
    error = {key: score if math.isfinite(score) else math.inf for key, (_, score) in moves.items()}
    candidates = sorted(moves, key=error.__getitem__)
    while group := _next_group(trials, kept, candidates, error):
        kept, done = _largest_passing_half(trials, kept, group, moves, phase)
        candidates = [key for key in candidates if key not in done]
    return kept


def _next_group(trials: Trials, kept: Config, candidates: list[str], error: Mapping[str, float]) -> list[str]:
    """The moves to try together next: the cheapest candidates whose errors, added in energy
    to the measured metric, the prediction keeps within the bound (the cheapest one alone
    without predictions)."""
    if not trials.predict:
        return candidates[:1]
    room = trials.bound ** 2 - trials.metric(kept) ** 2
    spent = itertools.accumulate(error[key] ** 2 for key in candidates)
    return [key for key, energy in zip(candidates, spent) if energy <= room]


def _largest_passing_half(trials: Trials, kept: dict[str, int], group: list[str],
                          moves: Mapping[str, tuple[int, float]], phase: str) -> tuple[dict[str, int], list[str]]:
    """Try ``group``'s moves together, halving the group (cheapest half kept) until it passes
    or a single move fails: the setting then kept, and the moves settled (applied, or the one
    that failed)."""
    while True:
        moved = {**kept, **{key: moves[key][0] for key in group}}
        if trials.run(moved, phase):
            return changed(moved), group
        if len(group) == 1:
            return kept, group
        group = group[:len(group) // 2]


def _bisection(trials: Trials, knobs: list[Knob], start: Config, level: int, attribute: Attribute) -> None:
    """Polygraphy-style: the smallest passing model-order prefix, then the latest start of a
    window ending there that still passes."""
    end = _bisect(lambda k: trials.run(raised(knobs[:k], level, start), "bisect end"), 0, len(knobs))
    # the window knobs[begin:end]: begin = 0 passes, begin = end raises nothing
    _bisect(lambda begin: not trials.run(raised(knobs[begin:end], level, start), "bisect start"), 0, end)


def _bisect(passes: Callable[[int], bool], failing: int, passing: int) -> int:
    """The smallest k in (failing, passing] with ``passes(k)``, by plain binary search
    (``passes`` is taken to be monotone)."""
    while passing - failing > 1:
        middle = (failing + passing) // 2
        if passes(middle):
            passing = middle
        else:
            failing = middle
    return passing


def _greedy(trials: Trials, knobs: list[Knob], start: Config, level: int, attribute: Attribute) -> None:
    """Neural Compressor-style: raise one more knob, in model order, until the bound holds."""
    for count in range(1, len(knobs) + 1):
        if trials.run(raised(knobs[:count], level, start), "greedy"):
            return
