"""What the suites run on a compiled target (plugin ``mluverify.plugins.compiled_selection``,
registered the way ``suites/conftest.py`` does): two hypothesis examples per test instead of the
profile's, the first sample of each OpInfo-like entry, waivers from the compilers' reports/*/waivers.toml;
nothing changes on other targets. No case is verified, so nothing is compiled."""
from __future__ import annotations

from pathlib import Path

import pytest

from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.plugins.compiled_selection import EXAMPLES, FUSED_EXAMPLES, is_compiled
from mluverify.report.records import ShardWriter

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # two pytest subprocesses

CONFTEST = """
    from hypothesis import settings

    settings.register_profile("six", max_examples=6, derandomize=True, database=None, deadline=None)
    settings.load_profile("six")

    def pytest_configure(config):
        config.pluginmanager.import_plugin("mluverify.plugins.compiled_selection")
"""

SUITE = """
    import os
    from typing import NamedTuple

    import pytest
    from hypothesis import given, strategies as st

    class Sample(NamedTuple):  # as the OpInfo suite's cases: an entry and a sample index
        op: str
        index: int

    def log(*words):
        with open(os.environ["SELECTION_LOG"], "a") as f:
            f.write(" ".join(map(str, words)) + "\\n")

    @given(x=st.integers())
    def test_drawn(mlu_target, x):
        log("drawn", mlu_target)

    @pytest.mark.parametrize("case", [Sample("a", 0), Sample("a", 1), Sample("b", 0)], ids=["a-0", "a-1", "b-0"])
    def test_sample(mlu_target, case):
        log("sample", mlu_target, case.op, case.index)

    def test_waived(request, mlu_target):
        marker = request.node.get_closest_marker("mlu_waiver")
        log("waiver", mlu_target, *(marker.args if marker else ("none",)))
"""

WAIVERS = """
[waivers]
"test_suite.py::test_waived[cpu:inductor]" = { reason = "a known deviation", until = "2099-01-01" }
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "reports" / "inductor").mkdir(parents=True)
    (pytester.path / "reports" / "inductor" / "waivers.toml").write_text(WAIVERS)
    log = pytester.path / "selection.log"
    monkeypatch.setenv("SELECTION_LOG", str(log))

    def run(*targets: str) -> list[str]:
        log.write_text("")
        result = pytester.runpytest_subprocess("-p", "mluverify", *(f"--mlu-target={t}" for t in targets),
                                               "-p", "no:cacheprovider", "--mlu-report", str(pytester.path / "run"))
        assert result.ret == 0, result.stdout.str()
        return log.read_text().splitlines()

    return run


def test_a_compiled_target_runs_fewer_examples_one_sample_per_entry_and_its_waivers(suite):
    lines = suite("cpu:inductor")
    assert lines.count("drawn cpu:inductor") == EXAMPLES == 2
    assert [line for line in lines if line.startswith("sample")] == ["sample cpu:inductor a 0", "sample cpu:inductor b 0"]
    assert "waiver cpu:inductor a known deviation 2099-01-01" in lines


def test_each_compilers_waiver_file_applies(suite, pytester):
    """A waiver in another compiler's file (``reports/<compiler>/waivers.toml``) marks the case
    its key names; the Inductor file no longer holds one."""
    (pytester.path / "reports" / "inductor" / "waivers.toml").write_text("[waivers]\n")
    (pytester.path / "reports" / "other").mkdir()
    (pytester.path / "reports" / "other" / "waivers.toml").write_text(WAIVERS.replace("a known", "another"))
    assert "waiver cpu:inductor another deviation 2099-01-01" in suite("cpu:inductor")


def test_a_skip_waiver_skips_the_case_until_it_expires(suite, pytester):
    """``skip = true`` (a case the compiler cannot run: no lowering) skips it; expired, the case
    runs again under its (expired) waiver."""
    waivers = pytester.path / "reports" / "inductor" / "waivers.toml"
    waivers.write_text(WAIVERS.replace('until = "2099-01-01"', 'until = "2099-01-01", skip = true'))
    assert not [line for line in suite("cpu:inductor") if line.startswith("waiver")]
    waivers.write_text(WAIVERS.replace('until = "2099-01-01"', 'until = "2000-01-01", skip = true'))
    assert "waiver cpu:inductor a known deviation 2000-01-01" in suite("cpu:inductor")


def test_other_targets_run_the_suites_unchanged(suite):
    lines = suite("cpu64:eager")
    assert lines.count("drawn cpu64:eager") == 6
    assert [line for line in lines if line.startswith("sample")] == [
        "sample cpu64:eager a 0", "sample cpu64:eager a 1", "sample cpu64:eager b 0"]
    assert "waiver cpu64:eager none" in lines


def test_a_fused_target_draws_fewer_examples_and_one_sample_per_entry_beside_a_full_target(suite):
    """In one run (one process, one hypothesis profile) with ``mlu:cnml`` and ``cpu64:eager``."""
    lines = suite("mlu:cnml", "cpu64:eager")
    assert (lines.count("drawn mlu:cnml"), lines.count("drawn cpu64:eager")) == (FUSED_EXAMPLES, 6) == (3, 6)
    assert [line for line in lines if line.startswith("sample")] == [
        "sample mlu:cnml a 0", "sample mlu:cnml b 0", "sample cpu64:eager a 0", "sample cpu64:eager a 1",
        "sample cpu64:eager b 0"]


def test_compiled_targets_are_the_modes_their_back_ends_say_compile():
    registry = Pipeline(new_plugin_manager(entry_points=False), Settings(), Path("."), ShardWriter).backends
    assert is_compiled("cpu:inductor", registry) and is_compiled("cuda:inductor", registry)
    assert is_compiled("ort:cpu", registry) and is_compiled("openvino:cpu", registry)
    assert not any(is_compiled(target, registry) for target in
                   ("cuda:eager", "cuda:tf32", "mlu:cnml", "cpu64:eager", "nosuch:mode"))
