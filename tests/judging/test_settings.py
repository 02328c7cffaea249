"""[tool.mluverify] keys of the judging rules: validated at start-up, the culprit named."""
import pytest

from mluverify.judge import GOLDEN_RULES, ToleranceTable
from mluverify.core.config import parse_settings
from mluverify.errors import ConfigError


def test_defaults_of_the_judging_keys():
    settings = parse_settings({})
    assert settings.allow == () and settings.skip == () and settings.core_versions == ()
    assert settings.determinism_share == 0.1 and settings.golden == GOLDEN_RULES


def test_judging_keys_are_parsed():
    settings = parse_settings({"allow": ["not_fused"], "skip": ["not_on_device"],
                               "core_versions": ["MLU270", "MLU370"], "determinism_share": 0.25,
                               "golden": {"float16": {"k": 4}}})
    assert settings.allow == ("not_fused",) and settings.skip == ("not_on_device",)
    assert settings.core_versions == ("MLU270", "MLU370") and settings.determinism_share == 0.25
    assert settings.golden["float16"].k == 4 and settings.golden["float16"].floor == GOLDEN_RULES["float16"].floor


@pytest.mark.parametrize("table, culprit", [
    ({"targets": []}, "targets is empty"),
    ({"regress_factor": -3}, "regress_factor = -3 must be >= 1"),
    ({"regress_factor": 0}, "regress_factor = 0 must be >= 1"),
    ({"noise_floor": -1}, "noise_floor = -1 must be >= 0"),
    ({"determinism_share": 1.5}, "determinism_share = 1.5 must be between 0 and 1"),
    ({"allow": ["not_fussed"]}, r"allow names unknown status\(es\) \['not_fussed'\]"),
    ({"skip": ["failed"]}, r"skip names unknown status\(es\) \['failed'\]"),
    ({"golden": {"float16": {"k": 0}}}, "float16: golden rule k must be a number > 0"),
    ({"golden": {"float16": {"floor": -1e-3}}}, "floor must be a number >= 0"),
    ({"golden": {"float17": {"k": 2}}}, "unknown dtype 'float17'"),
    ({"golden": {"float16": {"m": 2}}}, "float16 = "),
    ({"tolerances": {"softmax:float17": 0.01}}, "'softmax:float17': unknown dtype 'float17'"),
    ({"tolerances": {"softmax": "goldne"}}, "unknown tolerance policy 'goldne'"),
    ({"waivers": {"x*": {"reason": "r", "until": "2027-01-01", "max": -1}}}, "max=-1 must be a number >= 0"),
])
def test_malformed_judging_keys_name_the_culprit(table, culprit):
    with pytest.raises(ConfigError, match=culprit):
        parse_settings(table)


def test_tolerance_entries_may_choose_a_policy_per_op_dtype_or_mode():
    from mluverify.judge import resolve_tolerance

    table = ToleranceTable({"sum": "golden", "*:float16": "golden", "*::cnml": 0.03})
    def resolve(op, dtype, mode):
        return resolve_tolerance(op=op, dtype=dtype, mode=mode, policy_name=mode, table=table)
    assert resolve("sum", "float32", "cnnl").golden
    assert resolve("relu", "float16", "cnnl").golden
    assert not resolve("relu", "float32", "cnnl").golden
    assert resolve("relu", "float32", "cnml").bound == 0.03
    assert table.modes() == {"*::cnml": "cnml"}
