"""Bad input to quantize_dynamic_mlu: each rejection names the culprit and the valid choices."""
from __future__ import annotations

import pytest
import torch.nn as nn

from mluverify.device.quantization import QConfig, parse_qconfig, quantize_dynamic_mlu


def _net(in_channels=3):
    return nn.Sequential(nn.Conv2d(in_channels, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4, 2))


def test_unknown_qconfig_key_is_named_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"'use_average'.*'data_scale'.*'use_avg'"):
        quantize_dynamic_mlu(_net(), {"use_average": True}, gen_quant=True)


def test_unknown_dtype_is_named_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"'int4'.*'int16', 'int8'"):
        quantize_dynamic_mlu(_net(), dtype="int4", gen_quant=True)


def test_unknown_method_is_named_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"'kl'.*'minmax'"):
        quantize_dynamic_mlu(_net(), {"method": "kl"}, gen_quant=True)


def test_the_vendor_spelling_use_ave_means_use_avg():
    # The TestModel flow of the vendor document passes 'use_ave'; it must run unchanged.
    assert parse_qconfig({"use_ave": True}) == QConfig(use_avg=True)


def test_defaults_are_the_documented_ones():
    assert parse_qconfig(None) == QConfig(use_avg=False, data_scale=1.0, firstconv=False, mean=None,
                                          std=None, per_channel=False, method="minmax", iteration=1)


@pytest.mark.parametrize("spec", [{"data_scale": 0}, {"data_scale": float("nan")}, {"iteration": 0},
                                  {"iteration": 1.5}, {"use_avg": "yes"}, {"per_channel": 1}])
def test_out_of_range_numbers_are_rejected(spec):
    (key, value), = spec.items()
    with pytest.raises(ValueError, match=key):
        parse_qconfig(spec)


@pytest.mark.parametrize("in_channels", [2, 5])
def test_firstconv_needs_1_3_or_4_input_channels(in_channels):
    spec = {"firstconv": True, "mean": [0.5], "std": [0.5]}
    with pytest.raises(ValueError, match=rf"in_channels is {in_channels}.*1, 3 or 4"):
        quantize_dynamic_mlu(_net(in_channels), spec, gen_quant=True)


@pytest.mark.parametrize("mean,std", [([1.5], [0.5]), ([-0.1], [0.5]), ([0.5], [0.0]), ([0.5], [2.0])])
def test_firstconv_mean_and_std_must_lie_in_0_1(mean, std):
    with pytest.raises(ValueError, match="must lie in"):
        quantize_dynamic_mlu(_net(1), {"firstconv": True, "mean": mean, "std": std}, gen_quant=True)


def test_firstconv_needs_mean_and_std():
    with pytest.raises(ValueError, match="needs 'mean' and 'std'"):
        quantize_dynamic_mlu(_net(1), {"firstconv": True}, gen_quant=True)


def test_firstconv_mean_count_must_match_the_channels():
    with pytest.raises(ValueError, match="give 1 or 3 values"):
        quantize_dynamic_mlu(_net(3), {"firstconv": True, "mean": [0, 0], "std": [1, 1]}, gen_quant=True)


def test_firstconv_without_any_conv2d_is_rejected():
    with pytest.raises(ValueError, match="no nn.Conv2d"):
        quantize_dynamic_mlu(nn.Linear(3, 2), {"firstconv": True, "mean": [0], "std": [1]}, gen_quant=True)
