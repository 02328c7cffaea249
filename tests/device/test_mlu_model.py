"""The runtime API (shape of torch_mlu.core.mlu_model): settings, queues, memory statistics."""
from __future__ import annotations

import gc

import pytest
import torch

from mluverify.device import mlu_model as ct


def test_device_helpers():
    # mluverify's own tests run with two emulated cards (tests/conftest.py).
    assert ct.mlu_device() == torch.device("mlu:0")
    assert torch.ones(2).to(ct.mlu_device()).device == torch.device("mlu:0")
    assert ct.device_count() == 2 and ct.current_device() == 0
    ct.set_device(1)
    try:
        assert ct.current_device() == 1 and ct.mlu_device() == torch.device("mlu:1")
        assert torch.ones(2).to("mlu").device == torch.device("mlu:1"), "'mlu' means the current card"
    finally:
        ct.set_device(0)


@pytest.mark.parametrize("setter, bad, listed", [
    (ct.set_core_number, 2, "1, 4, 16"),
    (ct.set_core_number, True, "1, 4, 16"),
    (ct.set_core_version, "MLU290", "'MLU270', 'MLU370'"),
    (ct.set_input_format, 3, "0, 1, 2"),
    (ct.set_device, 2, "-1, 0, 1"),
    (ct.mlu_device, 5, "-1, 0, 1"),
    (ct.Queue, -2, "-1, 0, 1"),
    (ct.memory_allocated, 7, "-1, 0, 1"),
])
def test_invalid_settings_raise_value_error_listing_valid_values(setter, bad, listed):
    with pytest.raises(ValueError, match=f"valid: {listed}"):
        setter(bad)


def test_settings_are_recorded(core_version):
    ct.set_core_number(4)
    ct.set_input_format(0)
    core_version("MLU370")
    try:
        assert (ct.get_core_number(), ct.get_input_format(), ct.get_core_version()) == (4, 0, "MLU370")
    finally:
        ct.set_core_number(1)
        ct.set_input_format(1)


def test_fusion_flag_and_running_mode():
    from mluverify.device import kernel_mode

    assert ct._jit_can_fuse_on_mlu() is True
    ct._jit_override_can_fuse_on_mlu(False)
    try:
        assert ct._jit_can_fuse_on_mlu() is False
    finally:
        ct._jit_override_can_fuse_on_mlu(True)
    assert ct.get_running_mode() == "cnnl"
    with kernel_mode("cnml"):
        assert ct.get_running_mode() == "cnml"


def test_queue_switches_and_restores_the_current_queue_and_card():
    default = ct.current_queue()
    assert default.asynchronous is False and default.query() is True
    with ct.Queue(0) as outer:
        assert ct.current_queue() is outer
        with ct.Queue(1) as inner:
            assert ct.current_device() == 1 and ct.current_queue() is inner
            assert ct.current_queue(0) is outer, "each card has its own queue in effect"
            x = torch.abs(torch.randn(8).to("mlu"))
            inner.synchronize()
            assert inner.query() is True
        assert ct.current_queue() is outer and ct.current_device() == 0
    assert ct.current_queue() is default
    assert x.device == torch.device("mlu:1") and (x.cpu() >= 0).all()
    ct.synchronize()


def test_memory_statistics_count_live_storage_bytes_and_return_to_baseline():
    gc.collect()
    base = ct.memory_allocated()
    ct.reset_max_memory_allocated()
    a = torch.empty(1000, dtype=torch.float32, device="mlu")
    b = torch.ones(256, dtype=torch.float16).to("mlu")
    view = a[10:20]
    assert ct.memory_allocated() - base == 4000 + 512
    del a
    gc.collect()
    assert ct.memory_allocated() - base == 4000 + 512, "the view keeps the storage alive"
    del view, b
    gc.collect()
    assert ct.memory_allocated() == base
    assert ct.max_memory_allocated() - base >= 4512
    assert ct.memory_reserved() >= ct.memory_allocated()


def test_empty_cache_drops_cached_tf32_weights(core_version):
    core_version("MLU370")
    layer = torch.nn.Linear(64, 64).to("mlu")
    layer(torch.randn(2, 64).to("mlu"))
    assert ct.memory_reserved() - ct.memory_allocated() >= 64 * 64 * 4
    ct.empty_cache()
    assert ct.memory_reserved() == ct.memory_allocated()


def test_cached_weights_go_with_their_weights(core_version):
    core_version("MLU370")
    ct.empty_cache()
    layer = torch.nn.Linear(32, 32).to("mlu")
    layer(torch.randn(2, 32).to("mlu"))
    cached = ct.memory_reserved() - ct.memory_allocated()
    assert cached == 32 * 32 * 4
    layer.weight.detach().mul_(2)  # a device write: the cached copy is stale
    layer(torch.randn(2, 32).to("mlu"))
    assert ct.memory_reserved() - ct.memory_allocated() == cached, "the stale copy was replaced"
    del layer
    gc.collect()
    assert ct.memory_reserved() == ct.memory_allocated()
