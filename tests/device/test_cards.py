"""Several emulated cards: the setting, ``mlu:1``, the current card, copies, per-card memory."""
from __future__ import annotations

import gc
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from mluverify.core.config import Settings
from mluverify.device import _config, mlu_model as ct
from mluverify.errors import InvalidArgument

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != _config.CARDS_ENV}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**base, "PYTHONPATH": str(REPO), **env})


COUNT = "import torch, mluverify.device; print(torch.mlu.device_count(), torch.accelerator.device_count())"


def test_one_card_by_default_and_the_project_setting_in_a_fresh_process(tmp_path):
    assert _python(COUNT, tmp_path).stdout.split() == ["1", "1"]
    (tmp_path / "pyproject.toml").write_text("[tool.mluverify]\ndevice_count = 3\n")
    assert _python(COUNT, tmp_path).stdout.split() == ["3", "3"]
    assert _python(COUNT, tmp_path, MLUVERIFY_DEVICE_COUNT="4").stdout.split() == ["4", "4"], "env wins"


def test_a_bad_card_count_is_refused_naming_the_setting():
    with pytest.raises(InvalidArgument, match=r"MLUVERIFY_DEVICE_COUNT='0' must be a whole number of cards >= 1"):
        _config.card_count({"MLUVERIFY_DEVICE_COUNT": "0"}, Settings())
    with pytest.raises(InvalidArgument, match="MLUVERIFY_DEVICE_COUNT='two'"):
        _config.card_count({"MLUVERIFY_DEVICE_COUNT": "two"}, Settings())
    assert _config.card_count({}, Settings(device_count=5)) == 5


def test_tensors_live_on_the_card_they_were_put_on():
    x = torch.randn(3, 4)
    on1 = x.to("mlu:1")
    assert on1.device == torch.device("mlu:1") and on1.is_mlu
    assert torch.empty(2, device="mlu:1").device.index == 1
    assert (on1 * 2).device.index == 1 and on1.t().device.index == 1 and on1[1:].device.index == 1
    assert torch.equal((on1 * 2).cpu(), x * 2)


def test_copies_between_cards_and_the_cpu_are_bit_exact():
    x = torch.tensor([1.5, -0.0, float("nan"), float("inf"), 3e-41])
    across = x.to("mlu:0").to("mlu:1").to("mlu:0").to("mlu:1")
    assert across.device == torch.device("mlu:1")
    assert across.cpu().view(torch.int32).equal(x.view(torch.int32))
    target = torch.zeros(5, device="mlu:0")
    target.copy_(across)
    assert target.cpu().view(torch.int32).equal(x.view(torch.int32))


def test_ops_mixing_cards_raise_as_torch_does():
    with pytest.raises(RuntimeError, match=r"found at least two devices, mlu:0 and mlu:1!"):
        torch.ones(2, device="mlu:0") + torch.ones(2, device="mlu:1")


def test_the_current_card_is_per_thread():
    seen = {}

    def other():
        seen["other"] = ct.current_device()
        ct.set_device(1)
        seen["other after"] = torch.ones(1).to("mlu").device.index

    ct.set_device(0)
    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == {"other": 0, "other after": 1} and ct.current_device() == 0


def test_card_indices_out_of_range_are_refused_listing_the_valid_ones():
    for use in (lambda: ct.set_device(2), lambda: ct.Queue(9), lambda: ct.synchronize(3),
                lambda: ct.reset_device(2), lambda: ct.max_memory_allocated(4)):
        with pytest.raises(ValueError, match=r"MLU card index \d is out of range: this process has 2 emulated "
                                             r"card\(s\); valid: -1, 0, 1"):
            use()
    with pytest.raises(ValueError, match=r"MLU card index 2 is out of range: .* valid: -1, 0, 1"):
        torch.empty(1, device="mlu:2")
    with pytest.raises(IndexError, match=r"MLU card index 2 is out of range: this process has 2 emulated card\(s\), "
                                         r"valid indices 0..1"):
        torch.accelerator.set_device_index(2)  # torch's own API reaches the card guard


def test_memory_statistics_are_per_card():
    gc.collect()
    base = [ct.memory_allocated(0), ct.memory_allocated(1)]
    ct.reset_max_memory_allocated(1)
    on1 = torch.empty(1000, dtype=torch.float32, device="mlu:1")
    assert [ct.memory_allocated(0) - base[0], ct.memory_allocated(1) - base[1]] == [0, 4000]
    moved = on1.to("mlu:0")
    assert ct.memory_allocated(0) - base[0] == 4000
    del on1, moved
    gc.collect()
    assert [ct.memory_allocated(0), ct.memory_allocated(1)] == base
    assert ct.max_memory_allocated(1) - base[1] == 4000


def test_saved_tensors_come_back_on_their_card():
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4.0).to("mlu:1")}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="mlu:1")["w"]
    assert loaded.device == torch.device("mlu:1") and torch.equal(loaded.cpu(), torch.arange(4.0))
    buffer.seek(0)
    assert torch.load(buffer)["w"].device == torch.device("mlu:1")
