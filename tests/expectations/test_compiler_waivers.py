"""The real compilers' waiver files (reports/<compiler>/waivers.toml for iree:cpu, tvm:cpu and
executorch:xnnpack): each parses, each key names its target, each waiver of a real deviation names a
reproducer that exists beside the file, each waiver of a value has a ceiling; and at the gate a
waived deviation planted beyond its ceiling still fails, as does a deviation no waiver names."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from mluverify.core.expectations import UNSUPPORTED, WAIVED_BUT_WORSENED, load_waivers, waiver_for

ROOT = Path(__file__).parents[2]
TARGETS = {"iree": "iree:cpu", "tvm": "tvm:cpu", "executorch": "executorch:xnnpack"}
TODAY = dt.date(2027, 1, 1)  # before every waiver's expiry


def _waivers(compiler: str):
    return load_waivers(ROOT / "reports" / compiler / "waivers.toml", skippable=True)


@pytest.mark.parametrize("compiler", sorted(TARGETS))
def test_each_waiver_names_its_target_a_category_and_what_it_needs(compiler):
    waivers = _waivers(compiler)
    assert waivers
    for key, waiver in waivers.items():
        assert f"{TARGETS[compiler]}" in key and waiver.category, key
        assert waiver.skip or waiver.max is not None, f"{key}: a waiver of a value needs a ceiling"


@pytest.mark.parametrize("compiler", sorted(TARGETS))
def test_each_real_deviation_names_a_reproducer_beside_the_file(compiler):
    for key, waiver in _waivers(compiler).items():
        if waiver.category == UNSUPPORTED:
            continue
        named = re.findall(rf"reports/{compiler}/(repro_\w+\.py)", waiver.reason)
        assert named, f"{key}: no reproducer named"
        assert all((ROOT / "reports" / compiler / name).is_file() for name in named), (key, named)


def _records(rows: list[dict]):
    from mluverify.report.records import to_table

    return to_table([{"run_id": "run", "op": "op", "metric": "rel_mse", "bound": 0.02, "passed": False,
                      "waived": False, **row} for row in rows]).to_pandas()


def test_a_deviation_beyond_its_ceiling_or_unnamed_still_fails_the_gate():
    """tvm:cpu's add with alpha (alpha dropped, rel_mse 0.33 measured, ceiling 0.5): the measured
    value is excused, a planted 0.9 is not; a failing case no waiver names (relu) blocks."""
    from mluverify.report.gate import evaluate_gate

    waivers = _waivers("tvm")
    waived = "suites/ops/test_elementwise.py::test_binary_broadcast[float32-tvm:cpu-add_alpha]"
    ceiling = waiver_for(waived, waivers).max
    new = "suites/ops/test_elementwise.py::test_unary[float32-tvm:cpu-relu]"
    run = _records([{"case_id": waived, "target": "tvm:cpu", "value": 0.3333, "status": "failed"},
                    {"case_id": f"{waived}#2", "target": "tvm:cpu", "value": 2 * ceiling, "status": "failed"},
                    {"case_id": new, "target": "tvm:cpu", "value": 0.05, "status": "failed"}])
    blocking = evaluate_gate(run, waivers=waivers, today=TODAY).blocking
    assert sorted(zip(blocking["rule"], blocking["case_id"])) == [
        ("fails tolerance", new), (WAIVED_BUT_WORSENED, f"{waived}#2")]
