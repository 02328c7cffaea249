"""Task-level gates: a task metric (accuracy over a data set, top-1 or detection agreement with the
CPU) judged against its reference by a one-sided hypothesis test sized from a stated error budget.

Each of the ``n`` samples is scored right or wrong, so under the null hypothesis "the device is
as accurate as the reference ``p0``" the number right is Binomial(n, p0). The gate fails when it
is at most ``c``, the largest count with ``P(X <= c) <= alpha`` (an exact one-sided binomial
test): the threshold is ``(c + 1) / n``, so a device as good as the reference fails with
probability at most ``alpha``. A device worse by the effect size (``p1 = p0 - effect``) must fail
with probability at least ``1 - beta``; the samples that needs (normal approximation of the
binomial test, as TensorRT-LLM sizes its accuracy tests):

    n >= ((z(1 - alpha) * sqrt(p0 (1 - p0)) + z(1 - beta) * sqrt(p1 (1 - p1))) / effect) ** 2

The effect size defaults to 1 % of the float32 reference accuracy: MLPerf's bar for a quantized
or lower-precision model is 99 % of the FP32 reference. Fewer samples than that is an error
naming how many are needed, never a gate that cannot see the drop it is meant to catch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from mluverify.errors import InvalidArgument

# MLPerf's "99 % of FP32 reference accuracy": the default smallest drop the gate must catch.
DEFAULT_EFFECT_SHARE = 0.01
TASK_METRICS = ("accuracy", "top1_agreement", "detection_agreement")


@dataclass(frozen=True)
class TaskBudget:
    """The error budget of a task gate: ``alpha`` the chance that a device as accurate as the
    reference fails, ``beta`` the chance that one worse by the effect size passes, and the
    effect size itself as a share of the float32 reference accuracy (``effect_share``)."""

    alpha: float = 0.05
    beta: float = 0.2
    effect_share: float = DEFAULT_EFFECT_SHARE

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "effect_share"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise InvalidArgument(f"TaskBudget {name}={value!r} must lie between 0 and 1 (exclusive)")


@dataclass(frozen=True)
class TaskThreshold:
    """A task gate sized for ``samples``: pass when at least ``needed_right`` are right
    (``threshold`` as a share); ``effect`` is the absolute drop it catches with power
    ``1 - budget.beta``."""

    reference: float
    float32_reference: float
    samples: int
    needed_right: int
    effect: float
    budget: TaskBudget

    @property
    def threshold(self) -> float:
        return self.needed_right / self.samples

    def explain(self) -> str:
        """The test in words, for records and gate findings."""
        return (f"threshold {self.threshold:.4f} over {self.samples} samples: one-sided exact "
                f"binomial test against reference {self.reference:.4f} at alpha {self.budget.alpha:g}, power "
                f"{1 - self.budget.beta:g} against a drop of {self.effect:.4f} ({self.budget.effect_share:.0%} of "
                f"the float32 reference {self.float32_reference:.4f})")


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)`` for X ~ Binomial(n, p), summed in log space (exact for any n a data set has)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0 or p >= 1.0:
        return 1.0 if p <= 0.0 else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    return math.fsum(math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
                     for i in range(k + 1))


def required_samples(reference: float, effect: float, budget: TaskBudget) -> int:
    """Samples a one-sided test at ``budget.alpha`` needs to catch a drop of ``effect`` from
    ``reference`` with power ``1 - budget.beta`` (normal approximation; module docstring)."""
    worse = reference - effect
    if not 0 < effect <= reference:
        raise InvalidArgument(f"effect size {effect!r} must lie in (0, reference {reference!r}]")
    z = NormalDist().inv_cdf
    spread = z(1 - budget.alpha) * math.sqrt(reference * (1 - reference)) + \
        z(1 - budget.beta) * math.sqrt(worse * (1 - worse))
    return max(1, math.ceil((spread / effect) ** 2 - 1e-9))


def task_threshold(reference: float, samples: int, *, float32_reference: float | None = None,
                   budget: TaskBudget = TaskBudget(), what: str = "task metric") -> TaskThreshold:
    """The gate for a task metric measured on ``samples`` samples whose reference (for this
    model x dtype x quantization) is ``reference``; ``float32_reference`` (default: ``reference``)
    sizes the effect. InvalidArgument when ``samples`` is too few for ``budget``, saying how many
    are needed (``what`` names the case in that message)."""
    base = reference if float32_reference is None else float32_reference
    for name, value in (("reference", reference), ("float32 reference", base)):
        if not 0 < value <= 1:
            raise InvalidArgument(f"{what}: {name} {value!r} must lie in (0, 1]")
    effect = budget.effect_share * base
    needed = required_samples(reference, effect, budget)
    if samples < needed:
        raise InvalidArgument(
            f"{what}: {samples} samples are too few for its error budget (alpha {budget.alpha:g}, beta "
            f"{budget.beta:g}, effect {effect:.4g} = {budget.effect_share:g} x float32 reference {base:.4g}, "
            f"reference {reference:.4g}): at least {needed} are needed; use more samples or a larger effect_share")
    return TaskThreshold(reference, base, samples, _fail_at_most(samples, reference, budget.alpha) + 1, effect, budget)


def _fail_at_most(samples: int, reference: float, alpha: float) -> int:
    """The largest count right ``c`` with ``P(X <= c) <= alpha`` under Binomial(samples,
    reference) (-1 when even ``P(X = 0)`` exceeds alpha): the test's rejection region."""
    low, high = -1, samples  # P(X <= low) <= alpha < P(X <= high) (P(X <= samples) = 1 > alpha)
    while high - low > 1:
        middle = (low + high) // 2
        if binomial_cdf(middle, samples, reference) <= alpha:
            low = middle
        else:
            high = middle
    return low
