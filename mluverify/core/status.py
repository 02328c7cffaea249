"""How a case ended: its status, decided from the verdict and from how the case really ran.

A pass means the device computed the op under test, within its bound. The statuses, most
severe first (the first that applies is the case's status):

- ``errored``: the device (or the reference) raised;
- ``not_on_device``: the op under test ran as a CPU fallback (``mluverify.core.provenance``);
- ``not_fused``: a fused target ran the case layer by layer (the back end says why);
- ``nondeterministic``: two runs of the case on the device differ;
- ``failed``: the judged metric breaks its bound;
- ``passed``.

A live waiver turns any of the first five into ``waived`` (the record's ``reason`` keeps what it
was). ``[tool.mluverify] allow`` admits ``not_on_device`` / ``not_fused`` / ``nondeterministic``:
the test passes and the gate accepts the case, which still carries its own status.
"""
from __future__ import annotations

from dataclasses import dataclass

PASSED = "passed"
FAILED = "failed"
ERRORED = "errored"
WAIVED = "waived"
NOT_ON_DEVICE = "not_on_device"
NOT_FUSED = "not_fused"
NONDETERMINISTIC = "nondeterministic"

# Most severe first: a case with several records takes the first of its records' statuses.
STATUSES = (ERRORED, NOT_ON_DEVICE, NOT_FUSED, NONDETERMINISTIC, FAILED, WAIVED, PASSED)
# Statuses about how the case ran rather than its value: what `allow` and `skip` may name.
PROVENANCE_STATUSES = (NOT_ON_DEVICE, NOT_FUSED, NONDETERMINISTIC)


@dataclass(frozen=True)
class Facts:
    """What is known about one finished case, for deciding its status."""

    verdict_passed: bool
    error: str = ""
    ops_on_cpu: tuple[str, ...] = ()
    not_fused_reason: str | None = None
    nondeterminism: str = ""


def decide(facts: Facts) -> tuple[str, str]:
    """(status, why) for a case, ``why`` empty for a pass or a plain value failure."""
    if facts.error:
        return ERRORED, facts.error
    if facts.ops_on_cpu:
        return NOT_ON_DEVICE, f"the op under test ran on the CPU: {', '.join(facts.ops_on_cpu)}"
    if facts.not_fused_reason is not None:
        return NOT_FUSED, f"a fused target ran layer by layer: {facts.not_fused_reason or 'no reason given'}"
    if facts.nondeterminism:
        return NONDETERMINISTIC, f"two runs on the device differ: {facts.nondeterminism}"
    return (PASSED, "") if facts.verdict_passed else (FAILED, "")
