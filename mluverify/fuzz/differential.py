"""Differential judging of one program: a target against the CPU, blamed by a float64 run.

The program runs on the target (through a ``Runner``: the front end's back ends), on the CPU in
float32 (the reference) and on the CPU in float64 (the golden result: inputs widened, casts
round and widen back, ``OpSpec.golden_template``). The
target's mode policy judges the target against the reference (``mluverify.compare``); when that
fails, the ``golden`` policy decides whose error it is: the target's error against the float64
result within ``k x`` the reference's own (``GOLDEN_RULES``) clears the target (``reference``:
the CPU reference is as far off), beyond it the target deviates (``deviation``). A target that
raises is an ``error``, one whose process dies a ``crash`` (``mluverify.fuzz.isolation``).

torchfuzz's oracle is computed beside it for comparison: a program fails it only when the sums
of an output differ by more than 5 % relative and more than 1.0 absolute.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mluverify.errors import MluverifyError
from mluverify.fuzz.program import Program, run
from mluverify.judge import Verdict, compare, policy

PASS, DEVIATION, REFERENCE, ERROR, CRASH = "pass", "deviation", "reference", "error", "crash"
# What a campaign reports and keeps: a target that is off, raises, or dies.
FINDING_KINDS = (DEVIATION, ERROR, CRASH)
TORCHFUZZ_RELATIVE, TORCHFUZZ_ABSOLUTE = 0.05, 1.0


class TargetCrashed(MluverifyError):
    """The process running a target died (signal, abort) or stopped answering."""


class TargetUnavailable(MluverifyError):
    """A target that cannot run here (its back end's reason)."""


@dataclass(frozen=True)
class Judgement:
    """One program on one target: ``kind`` (``PASS`` ... ``CRASH``), why, the target's and the
    reference's errors against the float64 result (rel_mse), and torchfuzz's oracle's answer."""

    target: str
    kind: str
    reason: str
    device_error: float | None = None
    reference_error: float | None = None
    torchfuzz_fails: bool = False

    @property
    def is_finding(self) -> bool:
        return self.kind in FINDING_KINDS


# Runs a program on a target and returns its outputs on the CPU: the back ends are the front
# end's (``mluverify.cli.fuzz.TargetRunner``), this package sees none of them.
Runner = Callable[[Program, Sequence[Any], str], Any]


def judge(program: Program, inputs: Sequence[Any], target: str, runner: Runner, policy_name: str) -> Judgement:
    """Run and judge ``program`` on ``target`` (``runner`` executes it there; ``policy_name``:
    the target mode's tolerance policy)."""
    try:
        actual = runner(program, inputs, target)
    except TargetCrashed as exc:
        return Judgement(target, CRASH, str(exc))
    except TargetUnavailable:
        raise
    except Exception as exc:  # the target raised on a valid program: a finding of kind error
        return Judgement(target, ERROR, _first_line(exc))
    expected = run(program, inputs)
    golden = run(program, inputs, golden=True)
    actual = _pytree().tree_map(lambda t: t.detach().cpu(), actual)
    verdict = compare(actual, expected, tolerance=policy(policy_name), golden=golden)
    fails_sums = torchfuzz_fails(actual, expected)
    if verdict.passed:
        return Judgement(target, PASS, verdict.reason, verdict.device_error, verdict.reference_error, fails_sums)
    cleared = compare(actual, expected, tolerance=policy("golden"), golden=golden)
    if not cleared.passed and _integers_cleared(actual, expected, golden, _from_computed_floats(program, inputs)):
        return Judgement(target, REFERENCE, f"{_reason(verdict, cleared)}; integers made from floats: "
                         f"{INTEGER_RULE}", verdict.device_error, verdict.reference_error, fails_sums)
    kind = REFERENCE if cleared.passed else DEVIATION
    return Judgement(target, kind, _reason(verdict, cleared), verdict.device_error, verdict.reference_error,
                     fails_sums)


INTEGER_RULE = "each within the golden rule against the float64 run's integers"


def _from_computed_floats(program: Program, inputs: Sequence[Any]) -> list[bool]:
    """Per output: whether it is an integer or bool value that a float some node computed went
    into (a cast, a comparison, argmax, ... of it or of an integer made so), rather than one
    made of the inputs' values by integer ops alone."""
    values = run(program, inputs, every_value=True)
    tainted: dict[str, bool] = {}
    for index, (node, value) in enumerate(zip(program.nodes, values)):
        computed = [values[int(a[1:])].is_floating_point() or tainted[a] for a in node.args if a.startswith("v")]
        tainted[f"v{index}"] = not value.is_floating_point() and any(computed)
    return [tainted[name] for name in program.outputs]


def _integers_cleared(actual: Any, expected: Any, golden: Any, from_floats: Sequence[bool]) -> bool:
    """The golden rule for integer and bool outputs made from computed floats (``from_floats``,
    per output). The judge holds integers bit-exact, which is right while they are integers all
    the way (made of the inputs by integer ops: the float64 run's are the reference's). An
    integer cast from a computed float (``std`` scaled and cast, a comparison) moves by whole
    units with the float's last bit: such outputs are judged like floats, the target's rel_mse
    against the float64 run's integers within ``k x`` the reference's plus the float32 floor
    (``GOLDEN_RULES``). True when every output is within the golden policy (floats), equal,
    or so cleared."""
    import torch

    from mluverify.judge import GOLDEN_RULES, metrics

    pytree = _pytree()
    leaves = zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected), pytree.tree_leaves(golden), from_floats)
    for a, e, g, from_float in leaves:
        if e.is_floating_point():
            if not compare(a, e, tolerance=policy("golden"), golden=g).passed:
                return False
            continue
        if a.dtype != e.dtype or a.shape != e.shape or g.shape != e.shape:
            return False
        if torch.equal(a, e):
            continue
        reference_error = metrics(e.double(), g.double())["rel_mse"]
        bound = GOLDEN_RULES["float32"].bound(reference_error, e.numel())
        if not from_float or metrics(a.double(), g.double())["rel_mse"] > bound:
            return False
    return True


def _reason(verdict: Verdict, golden: Verdict) -> str:
    where = f"output {verdict.leaf}: " if verdict.leaf else ""
    return f"{where}{verdict.reason}; {golden.reason}"


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _pytree() -> Any:
    from torch.utils import _pytree

    return _pytree


def torchfuzz_fails(actual: Any, expected: Any) -> bool:
    """torchfuzz's numerics oracle: some output's sum differs by more than 5 % relative and
    more than 1.0 absolute (outputs of different structure or shape fail it too)."""
    got, want = _pytree().tree_leaves(actual), _pytree().tree_leaves(expected)
    if len(got) != len(want):
        return True
    for a, e in zip(got, want):
        if a.shape != e.shape:
            return True
        sum_a, sum_e = float(a.double().sum()), float(e.double().sum())
        difference = abs(sum_a - sum_e)
        if not (difference <= TORCHFUZZ_ABSOLUTE or difference <= TORCHFUZZ_RELATIVE * abs(sum_e)):
            return True
    return False


__all__ = ["CRASH", "DEVIATION", "ERROR", "FINDING_KINDS", "Judgement", "PASS", "REFERENCE", "Runner",
           "TargetCrashed", "TargetUnavailable", "judge", "torchfuzz_fails"]
