"""A back end that hangs on a program: a ``timeout`` finding within --program-timeout, its
process killed, and the campaign goes on to later programs and findings."""
import functools
import textwrap

import pytest

from mluverify.cli import main
from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.campaign import Budget, Campaign
from mluverify.fuzz.differential import DEVIATION, TIMEOUT
from mluverify.fuzz.isolation import IsolatedRunner
from mluverify.fuzz.ops import op_set

# A plugin as a user writes one, against the public API only: ``stalling:hang`` computes on the
# CPU but never returns from a program with an exponential; ``stalling:wrong`` adds 1 to every
# negation.
STALLING = '''
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify import hookimpl
from mluverify.core.backends import Backend, Execution


class _Stalling(TorchDispatchMode):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.mode == "hang" and func is torch.ops.aten.exp.default:
            time.sleep(3600)
        out = func(*args, **(kwargs or {}))
        return out + 1 if self.mode == "wrong" and func is torch.ops.aten.neg.default else out


class StallingBackend(Backend):
    name = "stalling"
    modes = {"hang": "cnml", "wrong": "cnml"}

    def execute(self, fn, args, kwargs, *, case):
        with _Stalling(case.mode), torch.no_grad():
            return Execution(fn(*args, **kwargs))


@hookimpl
def mluverify_add_backends(registry):
    registry.add(StallingBackend())
'''


@pytest.fixture
def stalling(tmp_path, monkeypatch):
    """The plugin's module name, importable here and in the child that runs the targets."""
    (tmp_path / "fuzz_stalling.py").write_text(textwrap.dedent(STALLING))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fuzz_stalling"


def test_a_hang_is_a_timeout_finding_and_the_campaign_goes_on(stalling):
    targets = ["stalling:hang", "stalling:wrong"]
    with IsolatedRunner(functools.partial(TargetRunner, (stalling,)), timeout_s=8.0) as runner:
        campaign = Campaign(targets, runner, dict.fromkeys(targets, "cnml"), ops=op_set(["exp", "neg", "relu"]),
                            shrink_runs=0)
        findings = campaign.run(0, Budget(programs=2))
    by_target = {f.judgement.target: f for f in findings}
    hang, wrong = by_target["stalling:hang"], by_target["stalling:wrong"]
    assert hang.judgement.kind == TIMEOUT and "no answer in 8 s (killed)" in hang.judgement.reason
    assert "exp" in hang.program.ops
    # The hanging target's later programs ran (in new children), and the next target's finding was made.
    assert campaign.stats["stalling:hang"].programs == 2 and runner.restarts >= 1
    assert campaign.stats["stalling:hang"].kinds[TIMEOUT] >= 1
    assert wrong.judgement.kind == DEVIATION and "neg" in wrong.program.ops
    assert findings.index(wrong) > findings.index(hang)


@pytest.mark.parametrize("options, message", [
    (["--program-timeout", "0"], "--program-timeout 0: must be > 0 seconds"),
    (["--program-timeout", "5", "--in-process"], "--program-timeout needs the child process: drop --in-process"),
])
def test_a_time_limit_that_cannot_hold_is_refused(options, message, capsys):
    assert main(["fuzz", "--target", "mlu:cnnl", "--budget", "1", *options]) == 2
    assert message in capsys.readouterr().err
