"""A waiver's reason and expiry travel with the case: into its record, summary.md and the HTML
detail view; the record's reason says once why the case would have failed."""
import datetime as dt

import pandas  # imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq

UNTIL = (dt.date.today() + dt.timedelta(days=30)).isoformat()
EXPIRED = (dt.date.today() - dt.timedelta(days=1)).isoformat()
SUITE = f"""
import pytest
import torch

@pytest.mark.mlu_tolerance(1e-30)
@pytest.mark.mlu_waiver("vendor bug 1234: erf off by 1 ulp", "{UNTIL}")
def test_waived(verify):
    verify(lambda x: x * 3.0 + 1e-3, torch.randn(64), op="mul")

@pytest.mark.mlu_tolerance(1e-30)
@pytest.mark.mlu_waiver("old vendor bug", "{EXPIRED}")
def test_expired(verify):
    verify(lambda x: x * 3.0 + 1e-3, torch.randn(64), op="mul")

def test_clean(verify):
    verify(torch.relu, torch.randn(64), op="relu")
"""
# A device whose `mul` is off by 1 % relative: within no bound of 1e-30.
CONFTEST = """
from mluverify import Backend, Execution, hookimpl

class Off(Backend):
    name = "off"
    modes = {"x": "cnnl"}

    def execute(self, fn, args, kwargs, *, case):
        return Execution(fn(*args, **kwargs) * (1.01 if case.op == "mul" else 1.0))

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Off())
"""


def test_the_waiver_is_in_the_record_the_summary_and_the_detail(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={run}", "--mlu-target=off:x", "-rx")
    result.assert_outcomes(passed=1, xfailed=1, failed=1)
    records = pq.read_table(run / "records.parquet").to_pandas().set_index("status")
    waived, expired, clean = records.loc["waived"], records.loc["failed"], records.loc["passed"]
    assert (waived["waiver_reason"], waived["waiver_until"]) == ("vendor bug 1234: erf off by 1 ulp", UNTIL)
    assert (expired["waiver_reason"], expired["waiver_until"]) == ("old vendor bug", EXPIRED)
    assert pandas.isna(clean["waiver_reason"]) and pandas.isna(clean["waiver_until"])
    # what it would have been, then the verdict's reason: each once
    assert waived["reason"].startswith("failed; ") and waived["reason"].count("(marker)") == 1
    result.stdout.fnmatch_lines([f"*XFAIL*waived until {UNTIL}: vendor bug 1234*"])
    summary = (run / "summary.md").read_text()
    waived_section = summary.split("Waived cases", 1)[1]
    assert "vendor bug 1234: erf off by 1 ulp" in waived_section and UNTIL in waived_section
    assert "old vendor bug" in waived_section and "relu" not in waived_section
    html = (run / "report.html").read_text()
    assert "waiver_reason" in html and "vendor bug 1234: erf off by 1 ulp" in html
