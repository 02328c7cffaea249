"""The op suite's special-point cases catch what its drawn cases miss: a device whose
``rsqrt(-0.0)`` is +inf and whose division takes a divisor of -0.0 as +0.0 (planted by
``unsigned_zero_plugin`` through ``mluverify_device_kernels``) fails exactly those two ops'
cases, on both targets and in both precisions, naming the op (the other selected ops pass in
the same run); the clean device passes the same cases."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).with_name("unsigned_zero_plugin.py")
# rsqrt and every division of the op suite: the planted kernels serve div only (div_floor and
# div_scalar reach other overloads or never divide by zero), so those must pass
SELECTED = "test_special_points and (rsqrt or div)"
PLANTED = {"rsqrt", "div"}

pytestmark = pytest.mark.slow


def _run(pytester: pytest.Pytester, report: Path, *plugins: str) -> tuple[pytest.RunResult, pd.DataFrame]:
    shutil.copy(PLUGIN, pytester.path / PLUGIN.name)
    result = pytester.runpytest_subprocess(
        "-p", "mluverify", *plugins, str(REPO / "suites/ops/test_elementwise.py"), "-k", SELECTED,
        "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), "--mlu-target=mlu:cnnl", "--mlu-target=mlu:cnml",
        "--mlu-core-version", "MLU270", "--mlu-report", str(report), "-p", "no:cacheprovider", "-q",
    )
    return result, pd.read_parquet(report / "records.parquet")


def test_signed_zero_bugs_fail_the_special_point_cases_naming_the_op(pytester: pytest.Pytester,
                                                                     tmp_path: Path) -> None:
    result, records = _run(pytester, tmp_path, "-p", "unsigned_zero_plugin")
    failed = records[records.status == "failed"]
    assert set(failed.op) == PLANTED and set(failed.dtype) == {"float32", "float16"}
    assert set(failed.target) == {"mlu:cnnl", "mlu:cnml"}
    assert set(records.op) > PLANTED and (records[~records.op.isin(PLANTED)].status == "passed").all()
    assert failed.reason.str.contains(r"actual inf vs expected -inf").all(), failed.reason.tolist()
    result.stdout.fnmatch_lines(["FAILED *test_special_points*rsqrt*", "FAILED *test_special_points*-div]*"])


@pytest.mark.heavy  # the control; make gate (CI) also runs these cases on the clean device
def test_the_clean_device_passes_the_special_point_cases(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result, records = _run(pytester, tmp_path)
    assert PLANTED < set(records.op) and (records.status == "passed").all(), records.reason.tolist()
    result.assert_outcomes(passed=len(records.case_id.unique()))
