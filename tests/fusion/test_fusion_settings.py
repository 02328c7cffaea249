"""Fusion settings from the environment and the fusible set from the plugin hook."""
from __future__ import annotations

import warnings

import pytest

from mluverify.device.fusion import FusionSettings, current_settings
from mluverify.device.fusion.settings import normalize_op_name, op_name, settings_from_env
from mluverify.errors import InvalidArgument

FUSIBLE = ["aten::conv2d", "aten::add.Tensor", "aten::relu"]


def test_forced_fallback_ops_leave_the_fusible_set():
    settings = settings_from_env(FUSIBLE, {"DEBUG_FORCED_FALLBACK_OPS": " aten::add.Tensor ,aten::relu.default"})
    assert settings.fusible == {"aten::conv2d"}
    assert settings.forced_fallback == {"aten::add.Tensor", "aten::relu"}


def test_known_forced_fallback_ops_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings_from_env(FUSIBLE, {"DEBUG_FORCED_FALLBACK_OPS": "aten::add.Tensor,aten::max_pool2d"})


@pytest.mark.parametrize("name", ["aten::no_such_op", "add.Tensor", "aten::add.NoSuchOverload"])
def test_unknown_forced_fallback_names_warn_naming_them(name):
    with pytest.warns(UserWarning, match=repr(name).replace(".", r"\.")):
        settings_from_env(FUSIBLE, {"DEBUG_FORCED_FALLBACK_OPS": f"aten::relu,{name}"})


def test_debug_and_log_level():
    settings = settings_from_env(FUSIBLE, {"FUSED_KERNEL_DEBUG": "CNNL", "FUSED_KERNEL_DEBUG_DIR": "/tmp/d",
                                           "TORCH_MIN_CNLOG_LEVEL": "-1"})
    assert (settings.debug, str(settings.debug_dir), settings.print_graph) == ("cnnl", "/tmp/d", True)
    assert not settings_from_env(FUSIBLE, {"TORCH_MIN_CNLOG_LEVEL": "0"}).print_graph


def test_malformed_log_level_is_invalid_argument():
    with pytest.raises(InvalidArgument, match="TORCH_MIN_CNLOG_LEVEL.*'debug'"):
        settings_from_env(FUSIBLE, {"TORCH_MIN_CNLOG_LEVEL": "debug"})


def test_settings_are_frozen_and_validated():
    with pytest.raises(InvalidArgument, match="FUSED_KERNEL_DEBUG"):
        FusionSettings(fusible=frozenset(), debug="gpu")
    with pytest.raises(AttributeError):
        FusionSettings(fusible=frozenset()).debug = "cpu"


def test_op_names_are_the_full_schema_names():
    import operator

    import torch

    assert op_name(torch.ops.aten.add.Tensor) == "aten::add.Tensor"
    assert op_name(torch.ops.aten.relu.default) == "aten::relu"
    assert op_name(operator.getitem) == "operator::getitem"
    assert normalize_op_name(" aten::relu.default ") == "aten::relu"


def test_the_device_supplies_the_seeds_ops_and_the_quantized_layers():
    fusible = current_settings({}).fusible
    assert {"aten::convolution", "aten::conv2d", "aten::_native_batch_norm_legit_no_training",
            "aten::relu", "aten::add.Tensor", "aten::max_pool2d", "aten::transpose.int",
            "mluverify::quant_conv", "mluverify::quant_linear"} <= fusible


def test_a_plugin_widens_the_fusible_set(monkeypatch):
    from mluverify import hookimpl
    from mluverify.core.plugin_manager import configured_plugin_manager

    class Widen:
        @hookimpl
        def mluverify_fusible_ops(self):
            return ["aten::cumsum"]

    with configured_plugin_manager([Widen()], entry_points=False):
        assert "aten::cumsum" in current_settings({}).fusible
    assert "aten::cumsum" not in current_settings({}).fusible


def test_public_names_are_exported_once_and_exist():
    import mluverify.device as device
    import mluverify.device.fusion as fusion

    assert len(set(fusion.__all__)) == len(fusion.__all__)
    assert all(hasattr(fusion, name) for name in fusion.__all__)
    assert (device.fuse, device.fusion_summary) == (fusion.fuse, fusion.fusion_summary)
