"""The search on a model whose error is known in closed form: each knob adds a fixed error
energy at each rung, and the output's rel_mse is the square root of the sum (independent errors
add in energy). The fewest changes are then known without the search: raise the knobs with the
largest energies until the rest fits the bound. No torch, no device: the strategies alone.
"""
from __future__ import annotations

import math
import random

import pytest

from mluverify.tune._search import Knob, Outcome, search

BOUND = 0.02
LADDER = ("int8", "int16", "float")


def _model(count: int, seed: int, int16_kept=()):
    """Knobs L0..L{count-1}, their int8 errors spread over a decade (no few dominate), int16
    errors 1/256 of them except for ``int16_kept`` (int16 does not help them: their int8 error
    is raised to 0.015 and kept at int16), float exact; ``evaluate`` and ``attribute`` as the
    tuner's."""
    draw = random.Random(seed)
    int8 = {f"layer:L{i}": draw.uniform(0.004, 0.012) for i in range(count)}
    int8.update({f"layer:{name}": 0.015 for name in int16_kept})
    errors = {key: (e8, e8 if key.partition(":")[2] in int16_kept else e8 / 256, 0.0) for key, e8 in int8.items()}
    knobs = [Knob("layer", key.partition(":")[2], LADDER) for key in errors]

    def metric(config) -> float:
        return math.sqrt(sum(errors[key][config.get(key, 0)] ** 2 for key in errors))

    def evaluate(config) -> Outcome:
        value = metric(config)
        return Outcome(value, value <= BOUND)

    def attribute(rung: int) -> dict[str, float]:
        return {key: per_rung[rung] for key, per_rung in errors.items()}

    return knobs, errors, evaluate, attribute


def _fewest_raised(errors) -> int:
    """The fewest knobs to raise to int16 (which keeps 1/256 of a knob's error, 1/65536 of its
    energy): raising a knob saves most of its energy, so the largest energies go first."""
    energies = sorted((e8 ** 2 for e8, _, _ in errors.values()), reverse=True)
    return next(k for k in range(len(energies) + 1)
                if sum(energies[k:]) + sum(energies[:k]) / 256 ** 2 <= BOUND ** 2)


@pytest.mark.parametrize("seed", range(5))
def test_spread_errors_need_fewer_trials_and_no_more_changes_than_bisection_or_greedy(seed):
    # the fewest changes are the top-k by energy, at int16
    knobs, errors, evaluate, attribute = _model(40, seed)
    results = {strategy: search(strategy, knobs, evaluate, bound=BOUND, budget=64, attribute=attribute)
               for strategy in ("attribution", "bisection", "greedy")}
    ranked = results["attribution"]
    assert ranked.passed and len(ranked.changes) == _fewest_raised(errors)
    assert set(ranked.changes.values()) == {"int16"}
    for other in ("bisection", "greedy"):
        assert results[other].passed
        assert len(ranked.trials) < len(results[other].trials), other
        assert len(ranked.changes) <= len(results[other].changes), other


def test_pruning_tries_only_what_the_scores_say_may_go():
    knobs, errors, evaluate, attribute = _model(40, 0)
    result = search("attribution", knobs, evaluate, bound=BOUND, budget=64, attribute=attribute)
    # the smallest passing ranked prefix is already minimal under the scores: nothing to prune
    assert not [t for t in result.trials if t.phase == "prune"]


def test_a_starting_config_with_unneeded_changes_is_pruned_in_one_trial():
    knobs, errors, evaluate, attribute = _model(40, 0)
    needed = sorted(errors, key=lambda key: -errors[key][0])[:_fewest_raised(errors)]
    smallest = sorted(errors, key=lambda key: errors[key][0])[:3]  # together far within the bound
    start = {key: 1 for key in needed + smallest}
    result = search("attribution", knobs, evaluate, bound=BOUND, budget=64, attribute=attribute, start=start)
    assert set(result.changes) == set(needed)
    assert [t.phase for t in result.trials] == ["as deployed", "starting config", "prune"]


def test_kept_changes_are_lowered_to_int16_where_the_scores_allow():
    # three layers int16 does not help: all-int16 misses the bound, so changes start at float;
    # every other kept change comes down to int16, together
    planted = ("L5", "L17", "L30")
    knobs, errors, evaluate, attribute = _model(40, 1, int16_kept=planted)
    result = search("attribution", knobs, evaluate, bound=BOUND, budget=64, attribute=attribute)
    assert result.passed
    assert [t for t in result.trials if t.phase == "all at rung 1" and not t.passed]
    assert sorted(key for key, rung in result.changes.items() if rung == "float") == sorted(
        f"layer:{name}" for name in planted)
    assert "int16" in result.changes.values()
    assert len([t for t in result.trials if t.phase == "lower rung"]) == 1
