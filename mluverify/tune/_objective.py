"""What a trial is judged by, whatever ran the model: the float model's output on the CPU as the
reference, judged by the ``cnml`` policy's rel_mse within ``bound``, or by a task gate (``Task``:
accuracy or top-1 agreement over the samples; the metric is then the shortfall ``1 - value``,
within ``1 - threshold``). The emulator's trials and a real int8 runtime's share it."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from mluverify.core.task import Task
from mluverify.errors import InvalidArgument
from mluverify.judge import compare
from mluverify.tune._search import Outcome, judged


class Objective:
    """The reference output, the rel_mse ``bound`` and the optional ``task`` with its gate
    (sized once for the samples of the reference: too few is an InvalidArgument naming how many
    are needed)."""

    def __init__(self, reference: Any, bound: float, task: Task | None = None) -> None:
        self.reference = reference
        self.bound = bound
        self.task = task
        self.gate = task.threshold(_samples(reference), "the judged batch") if task else None

    @property
    def judged_bound(self) -> float:
        """What a trial's metric must stay within: ``bound``, or the task's allowed shortfall."""
        return 1.0 - self.gate.threshold if self.gate else self.bound

    @property
    def metric_name(self) -> str:
        return f"1 - {self.task.metric}" if self.task else "rel_mse"

    def judge(self, output: Any) -> Outcome:
        """A trial's output (on the CPU) against the reference."""
        if self.task:
            scored = self.task.score(output, self.reference, "tune")
            return Outcome(1.0 - scored.value, scored.passed)
        return judged(compare(output, self.reference, mode="cnml", tolerance=self.bound), self.bound)

    def task_data(self) -> dict[str, Any] | None:
        """The task judged, as plain data (the generated test rebuilds it)."""
        if self.task is None:
            return None
        task, gate = self.task, self.gate
        return {"metric": task.metric, "reference": task.reference, "float32_reference": gate.float32_reference,
                "budget": asdict(gate.budget), "samples": gate.samples, "threshold": gate.threshold}


def _samples(output: Any) -> int:
    """The samples a task scores: the first dimension of the model's one output tensor."""
    import torch

    if not isinstance(output, torch.Tensor) or output.dim() == 0:
        raise InvalidArgument("a task metric scores one output tensor with the samples first; the model returns "
                              f"{type(output).__name__}")
    return len(output)
