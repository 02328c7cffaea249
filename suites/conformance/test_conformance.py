"""Device semantics: for every PyTorch OpInfo ``op_db`` entry, the device's results have the CPU's
type, dtype and shape (and, for views, strides); Python numbers are promoted as on the CPU.

One test per entry (``conformance.py`` says what is checked). The default selection checks each
entry's first two float32 samples; ``--mlu-heavy`` checks every float32 sample. Entries that can
kill their process (a segfault inside torch) run in a subprocess. Known gaps, with reasons, are
in ``known_gaps.toml``; an entry whose findings they explain is an xfail naming the reason.
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import conformance

HERE = Path(__file__).parent
GAPS = {entry: gap for gap in tomllib.loads((HERE / "known_gaps.toml").read_text())["gaps"]
        for entry in gap["entries"]}
# torch's own deprecation / beta notes on OpInfo samples say nothing about the device.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
# Entries that have killed their process (hfft: a SIGSEGV inside torch copying a conjugate view,
# fixed in the device's copies since): checked in a subprocess, so that a crash fails one test.
IN_SUBPROCESS = frozenset({"fft.hfft", "fft.hfft2", "fft.hfftn"})


def _entries() -> list:
    import torch  # noqa: F401

    return [pytest.param(info, id=conformance.entry_name(info),
                         marks=() if conformance.has_float32_samples(info) else
                         pytest.mark.skip(reason="no float32 CPU samples: the entry's op does not take float32"))
            for info in conformance.op_db()]


def _binary_entries() -> list:
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo

    return [pytest.param(info, id=conformance.entry_name(info)) for info in conformance.op_db()
            if isinstance(info, BinaryUfuncInfo) and conformance.has_float32_samples(info)]


def _in_subprocess(name: str, every: bool) -> list[conformance.Finding]:
    done = subprocess.run([sys.executable, str(HERE / "conformance.py"), name, *(["--all"] if every else [])],
                          capture_output=True, text=True, timeout=600)
    if done.returncode < 0:
        return [conformance.Finding(name, -1, f"killed by signal {-done.returncode} "
                                              f"({signal.Signals(-done.returncode).name})")]
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [conformance.Finding(name, -1, f"the checker failed: {last}")]
    return [conformance.Finding(name, sample, what) for sample, what in json.loads(done.stdout.splitlines()[-1])]


def _judge(name: str, findings: list[conformance.Finding]) -> None:
    gap = GAPS.get(name)
    unexplained = [f for f in findings if gap is None or not re.search(gap["finding"], f.what)]
    assert not unexplained, "the device's results differ from the CPU's:\n" + "\n".join(map(str, unexplained))
    if findings:
        pytest.xfail(f"known gap: {gap['reason']}")


@pytest.mark.parametrize("info", _entries())
def test_results_have_the_cpu_s_metadata(info, request) -> None:
    import mluverify.device  # noqa: F401

    name, every = conformance.entry_name(info), request.config.getoption("mlu_heavy")
    findings = _in_subprocess(name, every) if name in IN_SUBPROCESS else conformance.check_entry(info, every)
    _judge(name, findings)


@pytest.mark.parametrize("info", _binary_entries())
def test_python_number_operands_promote_as_on_the_cpu(info) -> None:
    import mluverify.device  # noqa: F401

    _judge(conformance.entry_name(info), conformance.check_number_operands(info))
