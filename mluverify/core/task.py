"""Task metrics a case declares (``verify(..., task=Task(...))``) and their registered references.

A task metric judges what users of a model care about, beside the output error: ``accuracy``
(the share of samples whose top-1 class is the true label), ``top1_agreement`` (the share
whose top-1 class on the target is the CPU's) or ``detection_agreement`` (a detector's boxes:
a target's box agrees with a CPU box of the same class overlapping it by IoU >= 0.5, matched
one to one; each matched pair is a sample right, each box left unmatched on either side a
sample wrong). Its reference is registered per model x dtype x
quantization in a TOML file (as TensorRT-LLM registers its accuracy references per model and
accuracy specification), one table per model and metric, with the error budget its gate is
sized from (``mluverify.judge.task_threshold``)::

    [digits_cnn.accuracy]
    budget = { alpha = 0.05, beta = 0.2, effect_share = 0.02 }
    references = { float32 = 0.9733, "float32:int8" = 0.9711 }   # "dtype" or "dtype:quant"

The ``float32`` reference sizes the effect (``effect_share`` of it). Nothing here imports torch
until a task is scored.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from mluverify.errors import ConfigError, InvalidArgument
from mluverify.judge import TASK_METRICS, TaskBudget, TaskThreshold, task_threshold


BUDGET_KEYS = ("alpha", "beta", "effect_share")
# A target's box and a CPU box are one detection when they overlap this much (and agree on the
# class): the PASCAL VOC criterion, COCO's AP50.
MATCH_IOU = 0.5


@dataclass(frozen=True)
class Task:
    """A case's task metric: ``metric`` (one of ``TASK_METRICS``), its ``reference`` for the
    case's model x dtype x quantization, the ``float32_reference`` that sizes the effect
    (default: ``reference``), the true ``labels`` (``accuracy``; one per sample, the samples
    being the first dimension of the output), the ``budget``; ``model`` names it.
    ``detections`` (``detection_agreement`` only): the detector's post-processing, mapping an
    output to one detection set per image, each with ``boxes`` ``(K, 4)`` (x1, y1, x2, y2) and
    ``labels`` ``(K,)``, best first."""

    metric: str
    reference: float
    float32_reference: float | None = None
    labels: Any = None
    budget: TaskBudget = TaskBudget()
    model: str = ""
    detections: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.metric not in TASK_METRICS:
            raise InvalidArgument(f"task metric {self.metric!r} is unknown; valid: {', '.join(TASK_METRICS)}")
        if (self.labels is None) == (self.metric == "accuracy"):
            raise InvalidArgument(f"task metric {self.metric!r}: labels are "
                                  f"{'needed' if self.metric == 'accuracy' else 'the CPU output; give none'}")
        if (self.detections is None) == (self.metric == "detection_agreement"):
            needed = "are needed" if self.detections is None else "go with detection_agreement only"
            raise InvalidArgument(f"task metric {self.metric!r}: detections (the post-processing, output -> boxes "
                                  f"and labels per image) {needed}")

    def threshold(self, samples: int, what: str) -> TaskThreshold:
        """The gate for ``samples`` samples (InvalidArgument when too few for the budget)."""
        return task_threshold(self.reference, samples, float32_reference=self.float32_reference,
                              budget=self.budget, what=f"{what}: task {self.model or self.metric}")

    def score(self, device_output: Any, cpu_output: Any, what: str) -> "TaskResult":
        """Score the target's output (logits, samples first; a detector's output) against the
        labels or the CPU's."""
        if self.metric == "detection_agreement":
            right, samples = matched_detections(self.detections(device_output), self.detections(cpu_output),
                                                f"{what}: task {self.model or self.metric}")
            return TaskResult(self.metric, right, self.threshold(samples, what))
        import torch

        predicted = _top1(device_output)
        truth = torch.as_tensor(self.labels) if self.metric == "accuracy" else _top1(cpu_output)
        if truth.shape != predicted.shape:
            raise InvalidArgument(f"{what}: task {self.model or self.metric}: {len(truth)} labels for "
                                  f"{len(predicted)} samples")
        gate = self.threshold(len(predicted), what)
        return TaskResult(self.metric, int((predicted == truth).sum()), gate)


def matched_detections(found: Any, expected: Any, what: str = "detections") -> tuple[int, int]:
    """``(pairs, samples)`` of two detectors' results, image by image: each ``expected``
    detection, best first, takes the unmatched ``found`` one of its class it overlaps most, if
    by IoU >= ``MATCH_IOU``; ``samples`` counts the pairs and every box left unmatched on either
    side. InvalidArgument (naming ``what``) when the two cover different numbers of images."""
    from torchvision.ops import box_iou

    found, expected = list(found), list(expected)
    if len(found) != len(expected):
        raise InvalidArgument(f"{what}: {len(found)} detection sets on the target for {len(expected)} images "
                              f"on the CPU")
    pairs = samples = 0
    for ours, theirs in zip(found, expected):
        overlap = box_iou(theirs.boxes.float(), ours.boxes.float())
        overlap[theirs.labels[:, None] != ours.labels[None, :]] = 0.0
        matched = 0
        for row in range(overlap.shape[0] if overlap.shape[1] else 0):
            best = overlap[row].argmax()
            if overlap[row, best] >= MATCH_IOU:
                overlap[:, best] = 0.0  # taken: one to one
                matched += 1
        pairs += matched
        samples += len(theirs.boxes) + len(ours.boxes) - matched
    return pairs, samples


def _top1(output: Any) -> Any:
    """The top-1 class of each sample of ``output`` (samples first, any other dimensions flattened)."""
    import torch

    scores = torch.as_tensor(output).detach().cpu()
    return scores.reshape(len(scores), -1).argmax(1)


@dataclass(frozen=True)
class TaskResult:
    """A task metric measured: ``right`` of ``gate.samples`` samples, judged by ``gate``."""

    metric: str
    right: int
    gate: TaskThreshold

    @property
    def value(self) -> float:
        return self.right / self.gate.samples

    @property
    def passed(self) -> bool:
        return self.right >= self.gate.needed_right

    def reason(self) -> str:
        """Why a task metric failed (``""`` when it passed)."""
        if self.passed:
            return ""
        return f"task {self.metric} {self.value:.4f} < {self.gate.explain()}"


@dataclass(frozen=True)
class TaskReferences:
    """The references of one file: (model, metric) -> (budget, dtype[:quant] -> reference)."""

    path: Path
    entries: Mapping[tuple[str, str], tuple[TaskBudget, Mapping[str, float]]]

    @classmethod
    def load(cls, path: Path) -> "TaskReferences":
        """Read and check ``path``; ConfigError names the file and the entry."""
        try:
            table = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"task references {path}: {exc}") from None
        entries = {}
        for model, metrics in table.items():
            if not isinstance(metrics, dict):
                raise ConfigError(f"task references {path}: [{model}] must hold one table per metric")
            for metric, entry in metrics.items():
                entries[model, metric] = _entry(path, f"{model}.{metric}", metric, entry)
        return cls(Path(path), entries)

    def task(self, model: str, dtype: str = "float32", quant: str = "", *, metric: str = "accuracy",
             labels: Any = None, budget: TaskBudget | None = None,
             detections: Callable[[Any], Any] | None = None) -> Task:
        """The task ``metric`` of ``model`` for a case in ``dtype`` / ``quant`` (``budget``:
        overrides the file's; ``labels``, ``detections``: as ``Task`` takes them)."""
        if (model, metric) not in self.entries:
            known = ", ".join(f"{m}.{k}" for m, k in sorted(self.entries))
            raise ConfigError(f"task references {self.path}: no [{model}.{metric}]; registered: {known}")
        stated, references = self.entries[model, metric]
        key = f"{dtype}:{quant}" if quant else dtype
        if key not in references or "float32" not in references:
            missing = key if key not in references else "float32"
            raise ConfigError(f"task references {self.path}: [{model}.{metric}] has no reference {missing!r}; "
                              f"registered: {', '.join(sorted(references))}")
        return Task(metric, references[key], references["float32"], labels, budget or stated, model, detections)


def _entry(path: Path, name: str, metric: str, entry: Any) -> tuple[TaskBudget, dict[str, float]]:
    where = f"task references {path}: [{name}]"
    if metric not in TASK_METRICS:
        raise ConfigError(f"{where}: metric {metric!r} is unknown; valid: {', '.join(TASK_METRICS)}")
    if not isinstance(entry, dict) or set(entry) - {"budget", "references"}:
        raise ConfigError(f"{where} must be a table of budget and references")
    references = entry.get("references", {})
    bad = {key: value for key, value in references.items()
           if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1}
    if bad or not references:
        raise ConfigError(f"{where}: references must map dtype[:quant] to a share in (0, 1], got {bad or references!r}")
    stated = entry.get("budget", {})
    if not isinstance(stated, dict) or set(stated) - set(BUDGET_KEYS):
        raise ConfigError(f"{where}: budget must be a table of {', '.join(BUDGET_KEYS)}, got {stated!r}")
    try:
        budget = replace(TaskBudget(), **stated)
    except (TypeError, InvalidArgument) as exc:
        raise ConfigError(f"{where}: budget: {exc}") from None
    return budget, {key: float(value) for key, value in references.items()}
