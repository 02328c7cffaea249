"""The waiver files of ONNX Runtime (reports/ort: ort:cpu, ort:dynamo) and OpenVINO
(reports/openvino: openvino:cpu, openvino:default): each waiver names its targets, a category and
a reproducer script that exists beside its file (a limitation's too: it shows the error); a waiver
of a value has a ceiling; and at the gate a deviation planted beyond a ceiling still fails, as does
a finite error on a case waived for its NaN positions only (max = 0)."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from mluverify.core.expectations import WAIVED_BUT_WORSENED, load_expectations, waiver_for

ROOT = Path(__file__).parents[2]
TARGET_PREFIX = {"ort": "ort:", "openvino": "openvino:"}
TODAY = dt.date(2027, 1, 1)  # before every waiver's expiry


def _waivers(compiler: str):
    return load_expectations(ROOT / "reports" / compiler / "waivers.toml", skippable=True).waivers


@pytest.mark.parametrize("compiler", sorted(TARGET_PREFIX))
def test_each_waiver_names_its_targets_category_ceiling_and_an_existing_reproducer(compiler):
    waivers = _waivers(compiler)
    assert waivers
    for key, waiver in waivers.items():
        assert f"-{TARGET_PREFIX[compiler]}" in key or f"[{TARGET_PREFIX[compiler]}" in key, key
        assert waiver.category and (waiver.skip or waiver.max is not None), key
        named = re.findall(rf"reports/{compiler}/(repro_\w+\.py)", waiver.reason)
        assert named and all((ROOT / "reports" / compiler / name).is_file() for name in named), (key, named)


def _run(rows: list[dict]):
    from mluverify.report.records import to_table

    return to_table([{"run_id": "run", "op": "op", "metric": "rel_mse", "bound": 0.02, "passed": False,
                      "waived": False, "status": "failed", **row} for row in rows]).to_pandas()


def test_planted_deviations_beyond_the_ceilings_fail_the_gate():
    """openvino:cpu's avg_pool1d (rel_mse 0.1006 measured): excused, twice its ceiling is not;
    ort:dynamo's clamp_min (NaN positions differ, value NaN): excused, a finite error is not;
    a failing case no waiver names blocks."""
    from mluverify.report.gate import evaluate_gate

    waivers = {**_waivers("openvino"), **_waivers("ort")}
    pool = "suites/ops/test_pool.py::test_pool[float32-openvino:cpu-avg_pool1d]"
    clamp = "suites/ops/test_elementwise.py::test_special_points[float32-ort:dynamo-clamp_min]"
    new = "suites/ops/test_elementwise.py::test_unary[float32-ort:dynamo-relu]"
    run = _run([{"case_id": pool, "target": "openvino:cpu", "value": 0.1006},
                {"case_id": f"{pool}#2", "target": "openvino:cpu", "value": 2 * waiver_for(pool, waivers).max},
                {"case_id": clamp, "target": "ort:dynamo", "value": float("nan")},
                {"case_id": f"{clamp}#2", "target": "ort:dynamo", "value": 0.05},
                {"case_id": new, "target": "ort:dynamo", "value": 0.05}])
    blocking = evaluate_gate(run, waivers=waivers, today=TODAY).blocking
    assert sorted(zip(blocking["rule"], blocking["case_id"])) == [
        ("fails tolerance", new), (WAIVED_BUT_WORSENED, f"{clamp}#2"), (WAIVED_BUT_WORSENED, f"{pool}#2")]
