"""``tune_inference`` / ``tune_training``: the search run on a model, its answer in the seeds'
terms (qconfig ``layers``, ``DEBUG_FORCED_FALLBACK_OPS``; per-layer ``adaptive_quantize`` bits)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch.nn as nn

from mluverify.core.task import Task
from mluverify.errors import InvalidArgument
from mluverify.tune._inference import FUSION_LADDER, PRECISION_LADDER, Deployment, InferenceProblem
from mluverify.tune._search import (
    BUDGET_SPENT, IMPOSSIBLE, WITHIN_BOUND, Config, Knob, SearchResult, check_budget, no_scores, search)
from mluverify.tune._training import TrainingProblem

DEFAULT_BOUND = 0.02  # the cnml policy: fused and quantized models within 2 % rel_mse
DEFAULT_BUDGET = 32


@dataclass
class TuneResult:
    """A search's result with its answer: ``answer`` is what to deploy, in the seeds' terms
    (inference: ``qconfig`` for ``quantize_dynamic_mlu``, ``dtype``,
    ``DEBUG_FORCED_FALLBACK_OPS``; training: ``bitwidth`` and per-layer ``layers`` bits);
    ``scores``: the attribution (knob key -> own error); ``message``: one line for users."""

    search: SearchResult
    answer: dict[str, Any]
    message: str
    kind: str
    scores: dict[str, float] = field(default_factory=dict)
    attribution_seconds: float = 0.0
    metric_name: str = "rel_mse"
    task: dict[str, Any] | None = None

    @property
    def changes(self) -> dict[str, str]:
        return self.search.changes

    def as_data(self, budget: int) -> dict[str, Any]:
        """Plain data for ``tune.json`` and the report page."""
        s = self.search
        return {"kind": self.kind, "strategy": s.strategy, "status": s.status, "message": self.message,
                "bound": s.bound, "metric_name": self.metric_name, "metric": s.metric, "passed": s.passed,
                "task": self.task,
                "changes": s.changes, "answer": self.answer, "budget": budget, "seconds": s.seconds,
                "attribution_seconds": self.attribution_seconds, "scores": self.scores,
                "trials": [vars(t) for t in s.trials]}


def message(result: SearchResult, budget: int, metric: str = "rel_mse") -> str:
    changed = ", ".join(f"{k.partition(':')[2]} -> {v}" for k, v in result.changes.items())
    if result.status == WITHIN_BOUND:
        return (f"already within the bound as deployed ({metric} {result.metric:.4g} <= {result.bound:.4g}); "
                f"nothing changed")
    if result.status == IMPOSSIBLE:
        return (f"no setting meets the bound: even every layer and op at the top of its ladder misses it; "
                f"best found {metric} {result.metric:.4g} > {result.bound:.4g} with {changed or 'no change'}")
    if result.status == BUDGET_SPENT:
        return (f"the budget of {budget} trials ran out before the bound was met; best found {metric} "
                f"{result.metric:.4g} with {changed or 'no change'}")
    return f"within the bound ({metric} {result.metric:.4g} <= {result.bound:.4g}) with {len(result.changes)} " \
           f"change{'s' * (len(result.changes) != 1)}: {changed}"


def _start_config(start: Mapping[str, Any] | None, knobs: Sequence[Knob]) -> Config:
    """A starting configuration ``{"layers": {name: rung}, "fallback_ops": [op, ...]}`` as rungs;
    names that are no knob of the model are an error naming them."""
    if not start:
        return {}
    unknown_keys = sorted(set(start) - {"layers", "fallback_ops"})
    if unknown_keys:
        raise InvalidArgument(f"unknown starting-config keys {', '.join(map(repr, unknown_keys))}; "
                              f"valid: 'layers', 'fallback_ops'")
    by_key = {knob.key: knob for knob in knobs}
    wanted = {f"layer:{name}": _rung_name(rung) for name, rung in dict(start.get("layers", {})).items()}
    wanted.update({f"op:{op}": "cnnl" for op in start.get("fallback_ops", ())})
    unknown = sorted(key.partition(":")[2] for key in wanted if key not in by_key)
    if unknown:
        known = ", ".join(sorted(knob.name for knob in knobs))
        raise InvalidArgument(f"the starting config names {', '.join(map(repr, unknown))}, not layers or fused "
                              f"ops of the model; known: {known}")
    config = {}
    for key, rung in wanted.items():
        ladder = tuple(map(str, by_key[key].ladder))
        if str(rung) not in ladder:
            raise InvalidArgument(f"the starting config gives {key.partition(':')[2]!r} the setting {rung!r}; "
                                  f"valid: {', '.join(ladder)}")
        config[key] = ladder.index(str(rung))
    return config


def _rung_name(rung: Any) -> Any:
    return "float" if rung is None else rung


def _inference_answer(changes: Mapping[str, str], problem: InferenceProblem) -> dict[str, Any]:
    deployment = Deployment.from_changes(changes)
    return {"qconfig": {"layers": dict(deployment.layers), "iteration": len(problem.calibration)},
            "dtype": problem.dtype, "mode": problem.mode,
            "DEBUG_FORCED_FALLBACK_OPS": ",".join(deployment.fallback_ops)}


def tune_inference(model: nn.Module, calibration: Sequence[Any], inputs: Any, *, bound: float = DEFAULT_BOUND,
                   budget: int = DEFAULT_BUDGET, dtype: str = "int8", mode: str = "fused",
                   strategy: str = "attribution", start: Mapping[str, Any] | None = None,
                   task: Task | None = None) -> TuneResult:
    """The fewest layers to keep at higher precision (int8 -> int16 -> float) and ops to force
    out of fusion (fused -> CNNL) so that ``model``, quantized in ``dtype`` and run on ``mlu``
    (``mode`` ``fused``: the ``mlu:cnml`` target; ``layer``: layer by layer), is within ``bound``
    (rel_mse against the float model on the CPU) on ``inputs``, in at most ``budget`` trials.

    :param calibration: the calibration batches (a tensor or a tuple of arguments each).
    :param strategy: ``attribution`` (default), ``bisection`` or ``greedy`` (for comparison).
    :param start: a starting configuration, ``{"layers": {name: "int16" | None}, "fallback_ops": [...]}``.
    :param task: judge by a task metric instead (``Task``: accuracy against labels or top-1
        agreement with the float model, over the samples of ``inputs``): within the bound when
        the task gate passes. The layers are still ranked by their rel_mse scores, which then
        only rank (they predict nothing about the gate).
    """
    check_budget(budget)
    problem = InferenceProblem(model, calibration, inputs, bound=bound, dtype=dtype, mode=mode, task=task)
    knobs = problem.knobs()
    start_config = _start_config(start, knobs)
    attribution = Attribution(strategy, lambda rung: _inference_scores(problem, knobs, rung))
    by_key = {knob.key: knob for knob in knobs}
    result = search(strategy, knobs, lambda config: problem.outcome(
        Deployment.from_changes(problem.changes(config, by_key))), bound=problem.objective.judged_bound,
        budget=budget, attribute=attribution, start=start_config, predict=task is None)
    objective = problem.objective
    return TuneResult(result, _inference_answer(result.changes, problem),
                      message(result, budget, objective.metric_name), "inference", attribution.scores,
                      attribution.seconds, objective.metric_name, objective.task_data())


def _inference_scores(problem: InferenceProblem, knobs: Sequence[Knob], rung: int) -> dict[str, float]:
    from mluverify.tune._attribution import attribution_scores

    return attribution_scores(problem, [k.name for k in knobs if k.kind == "layer"],
                              [k.name for k in knobs if k.kind == "op"], rung)


class Attribution:
    """The scores per rung, computed when the search asks (and only for the strategy that uses
    them), kept with the time they took; ``scores``: rung 0's, the ranking."""

    def __init__(self, strategy: str, compute: Callable[[int], dict[str, float]]) -> None:
        self.compute = compute if strategy == "attribution" else no_scores
        self.by_rung: dict[int, dict[str, float]] = {}
        self.seconds = 0.0

    @property
    def scores(self) -> dict[str, float]:
        return self.by_rung.get(0, {})

    def __call__(self, rung: int) -> dict[str, float]:
        if rung not in self.by_rung:
            started = time.perf_counter()
            self.by_rung[rung] = self.compute(rung)
            self.seconds += time.perf_counter() - started
        return self.by_rung[rung]


def tune_training(model: nn.Module, inputs: Any, target: Any, loss: Callable, *, bound: float = DEFAULT_BOUND,
                  budget: int = DEFAULT_BUDGET, steps_per_epoch: int = 1, strategy: str = "attribution",
                  start: Mapping[str, Any] | None = None) -> TuneResult:
    """Which layers ``adaptive_quantize`` should keep at 16 or 31 bits (the rest at 8) so that
    the gradients of one training step (``loss(model(*inputs), target)``) on ``mlu`` are each
    within ``bound`` of the float step on the CPU. Same search as ``tune_inference``."""
    check_budget(budget)
    problem = TrainingProblem(model, inputs, target, loss, bound=bound, steps_per_epoch=steps_per_epoch)
    knobs = problem.knobs()
    start_config = _start_config(start, knobs)
    attribution = Attribution(strategy, problem.scores)
    by_key = {knob.key: knob for knob in knobs}

    def evaluate(config: Config):
        return problem.outcome({key.partition(":")[2]: by_key[key].ladder[rung] for key, rung in config.items()})

    result = search(strategy, knobs, evaluate, bound=bound, budget=budget, attribute=attribution,
                    start=start_config)
    answer = {"bitwidth": 8, "steps_per_epoch": steps_per_epoch,
              "layers": {key.partition(":")[2]: int(bits) for key, bits in result.changes.items()}}
    return TuneResult(result, answer, message(result, budget), "training", attribution.scores,
                      attribution.seconds)


__all__ = ["DEFAULT_BOUND", "DEFAULT_BUDGET", "FUSION_LADDER", "PRECISION_LADDER", "TuneResult",
           "tune_inference", "tune_training"]
