"""Copying and (de)serialising ``mlu`` storages through CPU copies.

torch would allocate a new device storage with ``UntypedStorage(n, device="mlu")``, which a
Python back end cannot serve (it crashes). Two narrow patches route those paths through CPU
buffers instead: ``UntypedStorage.clone`` (used by ``copy.deepcopy``) for ``mlu`` storages only,
and a ``torch.serialization`` package that restores ``mlu`` locations (``torch.load(...,
map_location="mlu")``, unpickling).
"""
from __future__ import annotations

import torch

from mluverify.device._storage import DEVICE_TYPE, _adopt, buffer_by_storage

_original_clone = torch.UntypedStorage.clone


def clone_to_device(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    """A new ``mlu`` storage holding a copy of ``storage``'s bytes (from CPU or ``mlu``)."""
    source = buffer_by_storage(storage).cpu_storage if storage.device.type == DEVICE_TYPE else storage
    copy = torch.empty(max(source.nbytes(), 1), dtype=torch.uint8)
    copy[: source.nbytes()].copy_(torch.empty(0, dtype=torch.uint8).set_(source))
    return _adopt(copy.untyped_storage(), source.nbytes())


def _clone(self: torch.UntypedStorage) -> torch.UntypedStorage:
    if self.device.type == DEVICE_TYPE:
        return clone_to_device(self)
    return _original_clone(self)


def _tag(storage) -> str | None:
    return "mlu:0" if storage.device.type == DEVICE_TYPE else None


def _restore(storage, location: str):
    if location != DEVICE_TYPE and not location.startswith(f"{DEVICE_TYPE}:"):
        return None
    untyped = storage._untyped_storage if isinstance(storage, torch.TypedStorage) else storage
    return clone_to_device(untyped)


def register() -> None:
    torch.UntypedStorage.clone = _clone
    # Before torch's own privateuse1 package (priority 23), whose restore would allocate on mlu.
    torch.serialization.register_package(15, _tag, _restore)
