"""A target that kills its process is a finding of kind crash, and the campaign goes on."""
import functools

import pytest
import torch

from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.campaign import Budget, Campaign
from mluverify.fuzz.differential import CRASH, DEVIATION, PASS, judge
from mluverify.fuzz.isolation import IsolatedRunner
from mluverify.fuzz.ops import op_set
from mluverify.fuzz.program import Node, Program

PLANTED = "fuzz_planted"


def test_a_crash_is_isolated_as_a_finding_and_the_next_program_runs():
    crashing = Program(((2, 3),), (Node("relu", ("x0",)), Node("exp", ("v0",))))
    harmless = Program(((2, 3),), (Node("relu", ("x0",)), Node("neg", ("v0",))))
    x = [torch.ones(2, 3)]
    with IsolatedRunner(functools.partial(TargetRunner, (PLANTED,))) as runner:
        crashed = judge(crashing, x, "planted:crash", runner, "cnml")
        after = judge(harmless, x, "planted:crash", runner, "cnml")
    assert crashed.kind == CRASH and "SIGABRT" in crashed.reason
    assert after.kind == PASS
    assert runner.restarts == 1


@pytest.mark.heavy  # a campaign over two targets; the isolation itself is the test above
def test_a_campaign_keeps_a_crash_and_goes_on_to_the_next_target():
    with IsolatedRunner(functools.partial(TargetRunner, (PLANTED,))) as runner:
        campaign = Campaign(["planted:crash", "planted:fused"], runner,
                            {"planted:crash": "cnml", "planted:fused": "cnml"},
                            ops=op_set(["exp", "transpose", "matmul"]), chunk=10, shrink_runs=10)
        findings = campaign.run(0, Budget(programs=10))
    crashes = [f for f in findings if f.judgement.kind == CRASH]
    assert crashes and "exp" in crashes[0].program.ops
    assert campaign.stats["planted:fused"].programs == 10
    assert all(f.judgement.kind in (CRASH, DEVIATION) for f in findings)
