"""Differential judging of one program: a target against the CPU, blamed by a float64 run.

The program runs on the target (through a ``Runner``: the front end's back ends), on the CPU in
float32 (the reference) and on the CPU in float64 (the golden result: inputs widened, casts
round and widen back, ``OpSpec.golden_template``). The
target's mode policy judges the target against the reference (``mluverify.compare``); when that
fails, the ``golden`` policy decides whose error it is: the target's error against the float64
result within ``k x`` the reference's own (``GOLDEN_RULES``) clears the target (``reference``:
the CPU reference is as far off), beyond it the target deviates (``deviation``). Integers made
from computed floats are judged as floats (``_integers_from_floats_as_floats``). A target that
raises is an ``error``, one whose process dies a ``crash``, one that gives no answer within the
program time limit a ``timeout`` (``mluverify.fuzz.isolation``).

torchfuzz's oracle is computed beside it for comparison: a program fails it only when the sums
of an output differ by more than 5 % relative and more than 1.0 absolute.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mluverify.errors import MluverifyError
from mluverify.fuzz.program import Program, run
from mluverify.judge import Verdict, compare, policy

PASS, DEVIATION, REFERENCE, ERROR, CRASH, TIMEOUT = "pass", "deviation", "reference", "error", "crash", "timeout"
# What a campaign reports and keeps: a target that is off, raises, dies or hangs.
FINDING_KINDS = (DEVIATION, ERROR, CRASH, TIMEOUT)
TORCHFUZZ_RELATIVE, TORCHFUZZ_ABSOLUTE = 0.05, 1.0


class TargetCrashed(MluverifyError):
    """The process running a target died (signal, abort) or stopped answering."""


class TargetTimedOut(TargetCrashed):
    """A target gave no answer within the program time limit (its process was killed)."""


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
    the target mode's tolerance policy). Infinities the CPU runs agree on are the answer
    (``generate.all_defined``): the target must give them, signs included, at the same places."""
    try:
        actual = runner(program, inputs, target)
    except TargetTimedOut as exc:
        return Judgement(target, TIMEOUT, str(exc))
    except TargetCrashed as exc:
        return Judgement(target, CRASH, str(exc))
    except TargetUnavailable:
        raise
    except Exception as exc:  # the target raised on a valid program: a finding of kind error
        return Judgement(target, ERROR, _first_line(exc))
    expected = run(program, inputs)
    golden = run(program, inputs, golden=True)
    actual = _pytree().tree_map(lambda t: t.detach().cpu(), actual)
    fails_sums = torchfuzz_fails(actual, expected)
    actual, expected, golden, note = _integers_from_floats_as_floats(
        actual, expected, golden, _from_computed_floats(program, inputs))
    verdict = compare(actual, expected, tolerance=policy(policy_name), golden=golden, expect_non_finite=True)
    if verdict.passed:
        return Judgement(target, PASS, verdict.reason + note, verdict.device_error, verdict.reference_error,
                         fails_sums)
    cleared = compare(actual, expected, tolerance=policy("golden"), golden=golden, expect_non_finite=True)
    kind = REFERENCE if cleared.passed else DEVIATION
    return Judgement(target, kind, _reason(verdict, cleared) + note, verdict.device_error, verdict.reference_error,
                     fails_sums)


INTEGERS_AS_FLOATS = "; integers made from computed floats judged as floats"


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


def _integers_from_floats_as_floats(actual: Any, expected: Any, golden: Any, from_floats: Sequence[bool]
                                    ) -> tuple[Any, Any, Any, str]:
    """The outputs with each integer or bool output made from computed floats (``from_floats``,
    per output) in float64 on all three sides, and a note for the reason when there is one.

    The judge holds integers bit-exact, which is right while they are integers all the way
    (made of the inputs by integer ops: the float64 run's are the reference's). An integer cast
    from a computed float moves by whole units with the float's last bit: a product the target
    rounds otherwise, within its bound, times 10 and cast to int8 lands one unit beside the
    CPU's (``std`` times 1e12 cast to int64, tens of thousands). Such outputs are judged as
    floats: by the mode's policy against the reference, then by the golden rule. A target
    output of another dtype or shape is left alone, so that the judge names the mismatch."""
    import torch

    got, want, gold = (list(_pytree().tree_leaves(tree)) for tree in (actual, expected, golden))
    if not len(got) == len(want) == len(gold) == len(from_floats):
        return actual, expected, golden, ""
    widened = [i for i, made_from_floats in enumerate(from_floats) if made_from_floats
               and isinstance(got[i], torch.Tensor) and got[i].dtype == want[i].dtype and got[i].shape == want[i].shape]
    if not widened:
        return actual, expected, golden, ""
    for i in widened:
        got[i], want[i], gold[i] = got[i].double(), want[i].double(), gold[i].double()
    return tuple(got), tuple(want), tuple(gold), INTEGERS_AS_FLOATS


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
        if sum_a == sum_e:  # equal infinities too, whose difference is NaN
            continue
        difference = abs(sum_a - sum_e)
        if not (difference <= TORCHFUZZ_ABSOLUTE or difference <= TORCHFUZZ_RELATIVE * abs(sum_e)):
            return True
    return False


__all__ = ["CRASH", "DEVIATION", "ERROR", "FINDING_KINDS", "Judgement", "PASS", "REFERENCE", "Runner", "TIMEOUT",
           "TargetCrashed", "TargetTimedOut", "TargetUnavailable", "judge", "torchfuzz_fails"]
