"""The runtime API of the emulated MLU, in the shape of ``torch_mlu.core.mlu_model``.

Cards: ``MLUVERIFY_DEVICE_COUNT`` / ``[tool.mluverify] device_count`` (default 1); the current
card is per thread (``set_device``). ``Queue(i)`` queues card ``i``'s ops asynchronously inside
its ``with`` block (``mluverify.device.queues``); outside, ops run synchronously. Memory
figures are real byte counts of each card's live ``mlu`` storages; ``memory_reserved`` adds
the cached reduced-precision weights, which ``empty_cache`` drops. The core version, core
number and matmul precision are the numerics settings (``mluverify.device.numerics``): the
core number splits fused programs' reductions (deterministically); the input format is
recorded and validated, and decides the image channel order of offline models saved with it
(``mluverify.device.offline``).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from mluverify.device import _storage, _weight_cache, kernels, numerics, queues
from mluverify.device._fusion_switch import _jit_can_fuse_on_mlu, _jit_override_can_fuse_on_mlu  # noqa: F401
from mluverify.device.queues import Queue, check_card
from mluverify.errors import valid_choice

CORE_NUMBERS: tuple[int, ...] = numerics.CORE_NUMBERS
MATMUL_PRECISIONS: tuple[str, ...] = numerics.MATMUL_PRECISIONS
INPUT_FORMATS: dict[int, str] = {0: "RGB", 1: "RGBA", 2: "ARGB"}


class _Settings:
    input_format: int = 1  # RGBA, the documented default


def mlu_device(n: int = -1) -> torch.device:
    """The ``mlu`` device of card ``n`` (-1: the current card); ValueError lists the valid ones."""
    return torch.device(_storage.DEVICE_TYPE, check_card(n))


def set_device(device_index: int) -> None:
    """Make card ``device_index`` current for this thread (-1: keep the current one)."""
    torch.accelerator.set_device_index(check_card(device_index))


def current_device() -> int:
    """The calling thread's current card."""
    return _storage.current_card()


def device_count() -> int:
    """The number of emulated cards."""
    return _storage.CARDS


def set_core_number(core_number: int) -> None:
    """Cores a fused (inference) program's reductions are split across: 1, 4 or 16 (the seeds:
    it "applies only to inference mode"; layer by layer always uses
    ``numerics.LAYER_BY_LAYER_CORES``); ValueError lists the valid numbers."""
    numerics.set_core_number(core_number)


def get_core_number() -> int:
    return numerics.active_settings().core_number


def set_matmul_precision(precision: str) -> None:
    """What MLU270's conv / matmul ops quantize their inputs to: ``"int16"`` (default),
    ``"int8"``, ``"int31"`` or ``"float"`` (unquantized float32); also the environment variable
    ``MLUVERIFY_MATMUL_PRECISION``. ValueError lists the valid values."""
    numerics.set_matmul_precision(precision)


def get_matmul_precision() -> str:
    return numerics.active_settings().matmul_precision


def set_core_version(core_version: str) -> None:
    """Select the numerics profile (``"MLU270"``, ``"MLU370"``); ValueError lists the valid ones."""
    numerics.set_core_version(core_version)


def get_core_version() -> str:
    return numerics.active_core_version()


def check_input_format(input_format: int) -> int:
    """``input_format`` if it is one of ``INPUT_FORMATS``; ValueError listing them otherwise."""
    if input_format not in INPUT_FORMATS or isinstance(input_format, bool):
        raise valid_choice("MLU input format", input_format, INPUT_FORMATS)
    return input_format


def set_input_format(input_format: int) -> None:
    """Channel order of 3-channel images: 0 RGB, 1 RGBA (default), 2 ARGB; an offline model is
    saved for it with ``offline.save(..., input_format=...)`` (the seeds' genoff.py)."""
    _Settings.input_format = check_input_format(input_format)


def get_input_format() -> int:
    return _Settings.input_format


def get_running_mode() -> str:
    """The execution mode whose kernels run now (``"cnnl"`` layer by layer, ``"cnml"`` fused)."""
    return kernels.active_mode()


def current_queue(device_index: int = -1) -> Queue:
    """The queue in effect for card ``device_index`` (-1: the current card): the innermost
    ``with Queue`` block's, else the card's default (synchronous) queue."""
    return queues.current_queue(check_card(device_index))


def synchronize(device_index: int = -1) -> None:
    """Wait for every queue of the card; raise the first failure among them."""
    queues.synchronize_card(check_card(device_index))


def reset_device(device_index: int = -1) -> None:
    """Reset a card: its queued work finishes, its failures are dropped, its queues are retired
    (using one afterwards raises ``QueueResetError``) and its peak memory restarts."""
    card = check_card(device_index)
    queues.reset_card(card)
    _storage.reset_peak(card)


def memory_allocated(device_index: int = -1) -> int:
    """Bytes of the card's live ``mlu`` storages."""
    return _storage.memory_stats(check_card(device_index)).allocated


def max_memory_allocated(device_index: int = -1) -> int:
    return _storage.memory_stats(check_card(device_index)).max_allocated


def reset_max_memory_allocated(device_index: int = -1) -> None:
    _storage.reset_peak(check_card(device_index))


def memory_reserved(device_index: int = -1) -> int:
    """The card's allocated bytes plus the cached prepared weights (quantized / rounded copies,
    host memory shared by all cards, so counted with each; dropped by ``empty_cache``)."""
    return _storage.memory_stats(check_card(device_index)).allocated + _weight_cache.held_bytes()


def empty_cache() -> None:
    _weight_cache.clear()


@contextlib.contextmanager
def core_version(version: str) -> Iterator[numerics.NumericsProfile]:
    """Run the ``with`` block as core version ``version`` (numerics profile); restored after."""
    with numerics.numerics_settings(core_version=version) as settings:
        yield settings.profile


# The seeds' training API (mluverify.device.training), where the seeds call it: ct.set_cnml_enabled, ct.to.
from mluverify.device.training import (  # noqa: E402,F401
    get_cnml_enabled, get_rng_state, initial_seed, manual_seed, set_cnml_enabled, set_rng_state, to)
# The seeds' offline mode: ct.save_as_cambricon(name) around a fused run (docs/fusion.md).
from mluverify.device.offline import save_as_cambricon  # noqa: E402,F401
