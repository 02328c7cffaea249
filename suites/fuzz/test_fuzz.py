"""Fuzz regression corpus: the kept findings and a fixed seed range, on every target.

Each finding of the corpus (``corpus/``, or the directory in ``MLUVERIFY_FUZZ_CORPUS``) is
re-judged on every target: on its own target it is an expected failure while it reproduces
(the finding is open) and passes once fixed; every other target must pass it. The findings of
``corpus/fixed/`` (moved there by ``mluverify fuzz --replay CORPUS --retire-fixed`` once they no
longer reproduce) are regressions every target, their own included, must pass. Then a fixed,
small seed range of random programs runs on each target (programs the kept findings explain do
not fail). Targets run in this process: a crash ends this run (``mluverify fuzz`` isolates them).
The corpus's fuzz page goes into the run, and the run's report links it.
"""
import os
from pathlib import Path

import pytest

from mluverify.fuzz.campaign import Budget, Campaign
from mluverify.fuzz.corpus import CORPUS_ENV, FIXED, load_corpus
from mluverify.cli.fuzz import TargetRunner
from mluverify.fuzz.differential import judge

CORPUS = Path(os.environ.get(CORPUS_ENV) or Path(__file__).parent / "corpus")
FINDINGS = load_corpus(CORPUS) if CORPUS.is_dir() else []
FIXED_FINDINGS = load_corpus(CORPUS / FIXED) if (CORPUS / FIXED).is_dir() else []
SEEDS = (0, 1)
# Programs per seed: a fused target captures and builds every program (~1 s each on 2 cores).
PROGRAMS = {"cnml": 2, "offline": 2, "inductor": 2}
DEFAULT_PROGRAMS = 5
SHRINK_RUNS = 20


@pytest.fixture
def runner(mlu_core_version):
    return TargetRunner(core_version=mlu_core_version)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no fuzz corpus at {CORPUS}")
def test_fuzz_page(mlu_run_dir):
    """The kept findings' page (``fuzz.html``) is written into the run, beside its report."""
    from mluverify.cli.fuzz import page_rows
    from mluverify.report.fuzz_page import write_fuzz_page

    page = write_fuzz_page(page_rows(CORPUS), str(CORPUS), mlu_run_dir).read_text()
    assert all(finding.signature in page for finding in FINDINGS + FIXED_FINDINGS)


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.signature for f in FINDINGS])
def test_kept_finding(runner, mlu_target, finding):
    target = str(mlu_target)
    judgement = judge(finding.program, finding.inputs, target, runner, runner.policy(target))
    ops = " -> ".join(finding.program.ops)
    if target == finding.judgement.target and judgement.is_finding:
        pytest.xfail(f"open finding {finding.signature} ({ops}): {judgement.kind}: {judgement.reason}")
    assert not judgement.is_finding, f"{ops} on {target}: {judgement.kind}: {judgement.reason}"


@pytest.mark.parametrize("finding", FIXED_FINDINGS, ids=[f.signature for f in FIXED_FINDINGS])
def test_fixed_finding(runner, mlu_target, finding):
    target = str(mlu_target)
    judgement = judge(finding.program, finding.inputs, target, runner, runner.policy(target))
    assert not judgement.is_finding, (f"fixed finding {finding.signature} ({' -> '.join(finding.program.ops)}) "
                                      f"fails again on {target}: {judgement.kind}: {judgement.reason}")


@pytest.mark.parametrize("seed", SEEDS)
def test_seed(runner, mlu_target, seed):
    target = str(mlu_target)
    campaign = Campaign([target], runner, {target: runner.policy(target)},
                        shrink_runs=SHRINK_RUNS, known=list(FINDINGS))
    programs = PROGRAMS.get(mlu_target.mode, DEFAULT_PROGRAMS)
    found = campaign.search(target, seed, programs)
    assert campaign.stats[target].programs > 0
    assert found is None, (f"new finding on {target} (seed {seed}): {' -> '.join(found.program.ops)}: "
                           f"{found.judgement.kind}: {found.judgement.reason}; keep it with "
                           f"mluverify fuzz --target {target} --seed {seed} --budget {programs} --out {CORPUS}")
