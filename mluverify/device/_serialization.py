"""Copying and (de)serialising ``mlu`` storages through CPU copies.

torch would allocate a new device storage with ``UntypedStorage(n, device="mlu")``, which a
Python back end cannot serve (it crashes). Two narrow patches route those paths through CPU
buffers instead: ``UntypedStorage.clone`` (used by ``copy.deepcopy``) for ``mlu`` storages only,
and a ``torch.serialization`` package that restores ``mlu`` locations (``torch.load(...,
map_location="mlu")``, unpickling).
"""
from __future__ import annotations

import torch

from mluverify.device import _hazards
from mluverify.device._storage import DEVICE_TYPE, _adopt, buffer_by_storage, current_card

_original_clone = torch.UntypedStorage.clone


def clone_to_device(storage: torch.UntypedStorage, card: int) -> torch.UntypedStorage:
    """A new ``mlu`` storage on ``card`` holding a copy of ``storage``'s bytes (from CPU or
    ``mlu``, once the queued work writing them is finished)."""
    if storage.device.type == DEVICE_TYPE:
        buffer = buffer_by_storage(storage)
        _hazards.settle_read((buffer,))
        source = buffer.cpu_storage
    else:
        source = storage
    copy = torch.empty(max(source.nbytes(), 1), dtype=torch.uint8)
    copy[: source.nbytes()].copy_(torch.empty(0, dtype=torch.uint8).set_(source))
    return _adopt(copy.untyped_storage(), card, source.nbytes())


def _clone(self: torch.UntypedStorage) -> torch.UntypedStorage:
    if self.device.type == DEVICE_TYPE:
        return clone_to_device(self, self.device.index)
    return _original_clone(self)


def _tag(storage) -> str | None:
    return str(storage.device) if storage.device.type == DEVICE_TYPE else None


def _restore(storage, location: str):
    if location != DEVICE_TYPE and not location.startswith(f"{DEVICE_TYPE}:"):
        return None
    untyped = storage._untyped_storage if isinstance(storage, torch.TypedStorage) else storage
    card = torch.device(location).index
    return clone_to_device(untyped, current_card() if card is None else _checked_card(card, location))


def _checked_card(card: int, location: str) -> int:
    cards = torch.accelerator.device_count()
    if not 0 <= card < cards:
        raise RuntimeError(f"cannot restore a storage saved on {location!r}: this process has {cards} emulated "
                           f"MLU card(s) (valid: {', '.join(f'mlu:{i}' for i in range(cards))}); load with "
                           f"map_location='mlu:0' or set MLUVERIFY_DEVICE_COUNT")
    return card


def register() -> None:
    torch.UntypedStorage.clone = _clone
    # Before torch's own privateuse1 package (priority 23), whose restore would allocate on mlu.
    torch.serialization.register_package(15, _tag, _restore)
