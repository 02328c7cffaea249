"""The runtime API of the emulated MLU, in the shape of ``torch_mlu.core.mlu_model``.

One emulated device (index 0). Ops run synchronously, so a ``Queue`` is always idle when
queried and ``synchronize`` returns at once; queues still switch and restore like the real
ones. Memory figures are real byte counts of live ``mlu`` storages; ``memory_reserved`` adds
the cached reduced-precision weights, which ``empty_cache`` drops. Core number and input
format are recorded and validated; they do not change numerics (results are deterministic for
any core number). The core version selects the numerics profile.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from mluverify.device import _storage, _weight_cache, kernels, numerics
from mluverify.errors import valid_choice

CORE_NUMBERS: tuple[int, ...] = (1, 4, 16)
INPUT_FORMATS: dict[int, str] = {0: "RGB", 1: "RGBA", 2: "ARGB"}
DEVICE_INDICES: tuple[int, ...] = (-1, 0)  # -1: the current device


class _Settings:
    core_number: int = 1
    input_format: int = 1  # RGBA, the documented default
    can_fuse: bool = True


def _check_device_index(device_index: int) -> int:
    if device_index not in DEVICE_INDICES:
        raise valid_choice("MLU device index", device_index, DEVICE_INDICES)
    return 0


def mlu_device(n: int = -1) -> torch.device:
    """The ``mlu`` device (index ``n``; -1 is the current device)."""
    return torch.device(_storage.DEVICE_TYPE, _check_device_index(n))


def set_device(device_index: int) -> None:
    _check_device_index(device_index)


def current_device() -> int:
    return 0


def device_count() -> int:
    return 1


def set_core_number(core_number: int) -> None:
    """Cores per op (1, 4 or 16); ValueError lists the valid numbers."""
    if core_number not in CORE_NUMBERS or isinstance(core_number, bool):
        raise valid_choice("MLU core number", core_number, CORE_NUMBERS)
    _Settings.core_number = core_number


def get_core_number() -> int:
    return _Settings.core_number


def set_core_version(core_version: str) -> None:
    """Select the numerics profile (``"MLU270"``, ``"MLU370"``); ValueError lists the valid ones."""
    numerics.set_core_version(core_version)


def get_core_version() -> str:
    return numerics.active_profile().core_version


def set_input_format(input_format: int) -> None:
    """Channel order of 3-channel images: 0 RGB, 1 RGBA (default), 2 ARGB."""
    if input_format not in INPUT_FORMATS or isinstance(input_format, bool):
        raise valid_choice("MLU input format", input_format, INPUT_FORMATS)
    _Settings.input_format = input_format


def get_input_format() -> int:
    return _Settings.input_format


def _jit_override_can_fuse_on_mlu(flag: bool) -> None:
    """Enable (default) or disable fused (MagicMind-like) execution of traced modules."""
    _Settings.can_fuse = bool(flag)


def _jit_can_fuse_on_mlu() -> bool:
    return _Settings.can_fuse


def get_running_mode() -> str:
    """The execution mode whose kernels run now (``"cnnl"`` layer by layer, ``"cnml"`` fused)."""
    return kernels.active_mode()


class Queue:
    """A task queue of ``device_index``; ``with Queue(0):`` makes it current, then restores."""

    def __init__(self, device_index: int = -1) -> None:
        self.device_index = _check_device_index(device_index)
        self._previous: list[Queue] = []

    def query(self) -> bool:
        """True: every task has finished (the emulated device runs ops synchronously)."""
        return True

    def synchronize(self) -> None:
        """Wait for the queue's tasks (none are ever pending)."""

    def __enter__(self) -> "Queue":
        self._previous.append(_QueueState.current)
        _QueueState.current = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        _QueueState.current = self._previous.pop()

    def __repr__(self) -> str:
        return f"Queue(device_index={self.device_index})"


class _QueueState:
    current: Queue = Queue(0)


def current_queue() -> Queue:
    return _QueueState.current


def synchronize(device_index: int = -1) -> None:
    _check_device_index(device_index)


def memory_allocated(device_index: int = -1) -> int:
    """Bytes of live ``mlu`` storages."""
    _check_device_index(device_index)
    return _storage.memory_stats().allocated


def max_memory_allocated(device_index: int = -1) -> int:
    _check_device_index(device_index)
    return _storage.memory_stats().max_allocated


def reset_max_memory_allocated(device_index: int = -1) -> None:
    _check_device_index(device_index)
    _storage.reset_peak()


def memory_reserved(device_index: int = -1) -> int:
    """Allocated bytes plus the cached reduced-precision weights (dropped by ``empty_cache``)."""
    _check_device_index(device_index)
    return _storage.memory_stats().allocated + _weight_cache.held_bytes()


def empty_cache() -> None:
    _weight_cache.clear()


@contextlib.contextmanager
def core_version(version: str) -> Iterator[numerics.NumericsProfile]:
    """Temporarily select another core version (numerics profile)."""
    previous = get_core_version()
    profile = numerics.set_core_version(version)
    try:
        yield profile
    finally:
        numerics.set_core_version(previous)


# The seeds' training API (mluverify.device.training), where the seeds call it: ct.set_cnml_enabled, ct.to.
from mluverify.device.training import (  # noqa: E402,F401
    get_cnml_enabled, get_rng_state, initial_seed, manual_seed, set_cnml_enabled, set_rng_state, to)
