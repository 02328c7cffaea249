"""[tool.mluverify]: validated at start-up, culprits named; waiver globs."""
import datetime as dt

import pytest

from mluverify import matches_case_id
from mluverify.core.config import load_settings, parse_settings
from mluverify.errors import ConfigError


def test_defaults_without_a_table(tmp_path):
    settings = load_settings(tmp_path / "pyproject.toml")
    assert settings.targets == ("mlu:cnnl",) and settings.report_dir == "reports/latest"
    assert not settings.tolerances and not settings.waivers


def test_a_full_table_is_parsed(tmp_path):
    (tmp_path / "pyproject.toml").write_text("""
[tool.mluverify]
targets = ["cpu64:eager"]
regress_factor = 2
[tool.mluverify.tolerances]
softmax = 0.004
[tool.mluverify.waivers]
"suites/x.py::*" = { reason = "known", until = 2027-01-31 }
""")
    settings = load_settings(tmp_path / "pyproject.toml")
    assert settings.targets == ("cpu64:eager",) and settings.regress_factor == 2.0
    assert settings.waivers["suites/x.py::*"].until == dt.date(2027, 1, 31)


@pytest.mark.parametrize("table, culprit", [
    ({"target": ["mlu:cnnl"]}, "'target'"),
    ({"targets": "mlu:cnnl"}, "targets must be a list"),
    ({"regress_factor": "fast"}, "regress_factor"),
    ({"waivers": {"x*": {"reason": "r"}}}, "waiver 'x\\*'"),
    ({"waivers": {"x*": {"reason": "", "until": "2027-01-01"}}}, "non-empty reason"),
    ({"waivers": {"x*": {"reason": "r", "until": "soon"}}}, "'soon' is not a date"),
    ({"tolerances": {"softmax": "loose"}}, "'softmax'"),
])
def test_malformed_tables_name_the_culprit(table, culprit):
    with pytest.raises(ConfigError, match=culprit):
        parse_settings(table)


def test_invalid_toml_names_the_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.mluverify\n")
    with pytest.raises(ConfigError, match="pyproject.toml is not valid TOML"):
        load_settings(tmp_path / "pyproject.toml")


def test_case_id_globs_take_brackets_literally():
    case = "suites/ops/test_pool.py::test_avg_pool[mlu:cnml-float16]"
    assert matches_case_id("suites/ops/test_pool.py::*[mlu:cnml-*]", case)
    assert matches_case_id("*[mlu:cnml-float1?]", case)
    assert not matches_case_id("*[mlu:cnnl-*]", case)
    assert not matches_case_id("suites/ops/test_pool.py::test_avg_pool", case)  # the whole id


def test_a_waiver_file_is_read_with_the_same_entry_format(tmp_path):
    from mluverify.core.expectations import load_waivers, waiver_for

    path = tmp_path / "waivers.toml"
    path.write_text("""
[waivers]
"pow-*-float16" = { reason = "beyond float16's range", until = "2027-06-30" }
"conv-*" = { reason = "known", until = 2027-01-31, max = 0.04 }
""")
    waivers = load_waivers(path)
    assert waiver_for("pow-4-float16", waivers).until == dt.date(2027, 6, 30)
    assert waiver_for("conv-3", waivers).max == 0.04
    assert waiver_for("add-0", waivers) is None
    assert load_waivers(tmp_path / "absent.toml") == {}


@pytest.mark.parametrize("entry, culprit", [
    ('{ reason = "r" }', "needs 'reason' and 'until'"),
    ('{ reason = "r", until = "soon" }', "until='soon' is not a date"),
    ('{ reason = "", until = "2027-01-01" }', "non-empty reason"),
    ('{ reason = "r", until = "2027-01-01", max = -1 }', "max=-1 must be a number >= 0"),
    ('{ reason = "r", until = "2027-01-01", skip = true }', "needs 'reason' and 'until'"),  # not skippable
])
def test_waiver_file_errors_name_the_file_and_the_entry(tmp_path, entry, culprit):
    from mluverify.core.expectations import load_waivers

    path = tmp_path / "waivers.toml"
    path.write_text(f'[waivers]\n"pow-4" = {entry}\n')
    with pytest.raises(ConfigError, match=culprit) as raised:
        load_waivers(path)
    assert str(path) in str(raised.value) and "waiver 'pow-4'" in str(raised.value)


def test_a_skippable_waiver_file_marks_cases_to_skip(tmp_path):
    from mluverify.core.expectations import load_waivers

    path = tmp_path / "waivers.toml"
    path.write_text('[waivers]\n"a" = { reason = "raises", until = "2027-01-01", skip = true }\n'
                    '"b" = { reason = "off", until = "2027-01-01" }\n')
    waivers = load_waivers(path, skippable=True)
    assert waivers["a"].skip and not waivers["b"].skip
    path.write_text('[waivers]\n"a" = { reason = "raises", until = "2027-01-01", skip = "yes" }\n')
    with pytest.raises(ConfigError, match="waiver 'a': skip='yes' must be true or false"):
        load_waivers(path, skippable=True)


def test_an_invalid_waiver_file_is_named(tmp_path):
    from mluverify.core.expectations import load_waivers

    path = tmp_path / "waivers.toml"
    path.write_text("[waivers\n")
    with pytest.raises(ConfigError, match="waivers.toml is not valid TOML"):
        load_waivers(path)


@pytest.mark.parametrize("entry, culprit", [
    ('"add:float99" = 0.1', "key 'add:float99': unknown dtype 'float99'"),
    ('"a:b:c:d" = 0.1', "key 'a:b:c:d' must be 'op'"),
    ('add = "no-such-policy"', "'add': unknown"),
])
def test_tolerance_errors_name_the_file(tmp_path, entry, culprit):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f"[tool.mluverify.tolerances]\n{entry}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(pyproject)
    assert str(error.value).startswith(f"{pyproject}: [tool.mluverify.tolerances] ")
    assert culprit in str(error.value)


@pytest.mark.parametrize("key, value, bound", [
    ("regress_factor", 0.99, "must be >= 1"), ("noise_floor", -1e-9, "must be >= 0"),
    ("determinism_share", 1.01, "must be between 0 and 1"), ("determinism_share", float("nan"), "between"),
])
def test_a_numeric_key_out_of_its_bounds_names_key_value_and_bound(key, value, bound):
    with pytest.raises(ConfigError, match=rf"cli-test: \[tool.mluverify\] {key} = .* {bound}"):
        parse_settings({key: value}, source="cli-test")
