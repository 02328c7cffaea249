"""Waivers in one format: categories, scopes and the one matching rule (core.expectations)."""
import datetime as dt

import pytest

from mluverify.core.expectations import (CATEGORIES, Where, covers, load_expectations, load_waivers,
                                         parse_waivers, waiver_for)
from mluverify.errors import ConfigError

CASE = "suites/ops/test_matmul.py::test_mm[float32-mlu:cnml-{core}-mm]"


def one(entry, pattern="suites/*"):
    return parse_waivers({pattern: {"reason": "known", "until": "2099-01-01", **entry}}, "w.toml")[pattern]


def test_a_waiver_scoped_to_mlu270_does_not_waive_the_same_case_on_mlu370():
    waivers = {"suites/ops/*": one({"category": "quantization", "scope": {"cores": ["MLU270"]}})}
    on_270 = Where("mlu:cnml", "MLU270", "emulator", "2.10.0")
    on_370 = Where("mlu:cnml", "MLU370", "emulator", "2.10.0")
    assert waiver_for(CASE.format(core="MLU270"), waivers, on_270) is waivers["suites/ops/*"]
    assert waiver_for(CASE.format(core="MLU370"), waivers, on_370) is None


def test_scope_on_target_device_and_torch_range():
    waiver = one({"scope": {"targets": ["mlu:cnml"], "devices": ["emulator"], "torch": ">=2.10,<2.15"}})
    here = Where("mlu:cnml", "MLU270", "emulator", "2.12.1+cpu")
    assert covers("suites/*", waiver, "suites/x", here)
    assert not covers("suites/*", waiver, "suites/x", Where("mlu:cnnl", "MLU270", "emulator", "2.12.1"))
    assert not covers("suites/*", waiver, "suites/x", Where("mlu:cnml", "MLU270", "torch_mlu", "2.12.1"))
    assert not covers("suites/*", waiver, "suites/x", Where("mlu:cnml", "MLU270", "emulator", "2.15.0"))
    assert not covers("suites/*", waiver, "suites/x", Where("mlu:cnml", "MLU270", "emulator", "2.9.9"))
    # a scoped field the place does not know is not confirmed: the waiver does not apply
    assert not covers("suites/*", waiver, "suites/x", Where("mlu:cnml", "MLU270", None, "2.12"))
    # an unscoped waiver covers any place; the glob still decides
    assert covers("suites/*", one({}), "suites/x", Where())
    assert not covers("suites/*", one({}), "other/x", Where())


@pytest.mark.parametrize("entry, words", [
    ({"category": "cosmic rays"}, "category='cosmic rays' is unknown"),
    ({"scope": {"targets": ["mlu:warp"]}}, "unknown 'mlu:warp'"),
    ({"scope": {"cores": ["MLU990"]}}, "unknown 'MLU990'"),
    ({"scope": {"torch": ">=2.15,<2.10"}}, "inverted"),
    ({"scope": {"torch": "~2.1"}}, "must be '>=LOW'"),
    ({"scope": {"planet": ["mars"]}}, "scope="),
    ({"created": "2027-01-02", "until": "2027-01-01"}, "expired when written"),
])
def test_bad_entries_are_errors_naming_the_entry_and_file(entry, words):
    with pytest.raises(ConfigError) as caught:
        one(entry, pattern="pow-4")
    assert words in str(caught.value) and "w.toml: waiver 'pow-4'" in str(caught.value)


def test_every_category_is_accepted_and_kept():
    assert [one({"category": name}).category for name in CATEGORIES] == list(CATEGORIES)


def test_a_file_maps_its_keys_to_case_ids_by_the_longest_prefix(tmp_path):
    path = tmp_path / "waivers.toml"
    path.write_text('[expectations]\ncase_ids = { "" = "t.py::a[*-{key}]", "grad:" = "g.py::b[*-{key}]" }\n'
                    '[waivers]\n"pow-4" = { reason = "r", until = "2099-01-01", category = "dtype range" }\n'
                    '"grad:abs-0" = { reason = "r", until = "2099-01-01" }\n')
    loaded = load_expectations(path)
    assert loaded.case_id_globs == {"pow-4": "t.py::a[*-pow-4]", "grad:abs-0": "g.py::b[*-abs-0]"}
    assert load_waivers(path)["pow-4"].category == "dtype range"


def test_every_waiver_in_the_repository_is_categorised():
    from pathlib import Path

    from mluverify.cli.expectations import DEFAULT_FILES
    from mluverify.core.config import load_settings

    root = Path(__file__).parents[2]
    waivers = [*load_settings(root / "pyproject.toml").waivers.values()]
    for name in DEFAULT_FILES:
        waivers += load_waivers(root / name, skippable=True).values()
    assert waivers and all(waiver.category in CATEGORIES for waiver in waivers)


def test_the_gate_excuses_a_finding_only_where_the_waiver_holds():
    import pandas as pd

    from mluverify.report.gate import waiver_reasons

    findings = pd.DataFrame({"case_id": ["t[a]", "t[a]"], "target": ["mlu:cnml", "mlu:cnnl"], "waiver": ["", ""]})
    waivers = {"t[*]": one({"scope": {"targets": ["mlu:cnml"]}}, pattern="t[*]")}
    reasons = waiver_reasons(findings, waivers, dt.date(2026, 1, 1))
    assert reasons.tolist()[1] == "" and reasons.tolist()[0].startswith("t[*]: known")


class _Item:
    """The little of a pytest item ``_waiver_for`` reads."""

    nodeid = "t.py::test_mm[mlu:cnml-MLU270]"

    def __init__(self, marker=None):
        self.marker = marker

    def get_closest_marker(self, name):
        return self.marker if name == "mlu_waiver" else None


def test_the_plugin_applies_a_scoped_waiver_only_where_the_case_runs():
    import pytest as pytest_module

    from mluverify.core.case import Case, Target
    from mluverify.core.config import Settings
    from mluverify.pytest_plugin.plugin import _waiver_for

    settings = Settings(waivers={"t.py::*": one({"scope": {"cores": ["MLU270"]}}, pattern="t.py::*")})
    case = Case("t.py::test_mm[x]", "mm", Target.parse("mlu:cnml"), core_version="MLU270")
    elsewhere = Case("t.py::test_mm[x]", "mm", Target.parse("mlu:cnml"), core_version="MLU370")
    assert _waiver_for(_Item(), case, settings) is settings.waivers["t.py::*"]
    assert _waiver_for(_Item(), elsewhere, settings) is None
    marker = pytest_module.mark.mlu_waiver("known", "2099-01-01", category="quantization",
                                           scope={"targets": ["mlu:cnnl"]}).mark
    assert _waiver_for(_Item(marker), case, Settings()) is None
    on_cnnl = Case("t.py::test_mm[x]", "mm", Target.parse("mlu:cnnl"), core_version="MLU270")
    assert _waiver_for(_Item(marker), on_cnnl, Settings()).category == "quantization"
