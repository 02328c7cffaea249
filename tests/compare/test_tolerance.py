"""Tolerance resolution: marker > hook > [tool.mluverify.tolerances] > policy."""
import pytest

from mluverify.judge import Tolerance, ToleranceTable, resolve_tolerance
from mluverify.errors import ConfigError

TABLE = ToleranceTable({
    "softmax": 0.004,
    "softmax:float16": 0.005,
    "softmax:float16:cnml": {"metric": "rae", "bound": 0.03},
    "gelu::cnnl": 0.006,
})


def resolve(op="softmax", dtype="float32", mode="cnnl", **kwargs):
    kwargs.setdefault("table", TABLE)
    return resolve_tolerance(op=op, dtype=dtype, mode=mode, policy_name=mode, **kwargs)


def test_policy_when_nothing_else_applies():
    assert resolve(op="relu") == Tolerance("rel_mse", 0.003, "policy:cnnl")
    assert resolve(op="relu", mode="cnml").bound == 0.02


def test_config_table_most_specific_entry_wins():
    assert resolve().bound == 0.004
    assert resolve(dtype="float16").bound == 0.005
    assert resolve(dtype="float16", mode="cnml") == Tolerance("rae", 0.03, "config:softmax:float16:cnml")
    assert resolve(op="gelu", mode="cnnl").bound == 0.006
    assert resolve(op="gelu", mode="cnml").bound == 0.02


def test_hook_beats_config_and_marker_beats_hook():
    hook = Tolerance("rel_mse", 0.1, "hook")
    assert resolve(hook=hook) is hook
    assert resolve(hook=hook, marker=0.2) == Tolerance("rel_mse", 0.2, "marker")


def test_hook_returning_a_non_tolerance_is_an_error_naming_the_type():
    with pytest.raises(ValueError, match="type=float"):
        resolve(hook=0.5)


@pytest.mark.parametrize("entries, culprit", [
    ({"a:b:c:d": 0.1}, "'a:b:c:d'"),
    ({"softmax": "loose"}, "'softmax'"),
    ({"softmax": {"metric": "cosine", "bound": 0.1}}, "cosine"),
    ({"softmax": {"bound": -1}}, ">= 0"),
])
def test_malformed_table_entries_are_config_errors_naming_the_culprit(entries, culprit):
    with pytest.raises(ConfigError, match=culprit):
        ToleranceTable(entries)
