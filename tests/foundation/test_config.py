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
