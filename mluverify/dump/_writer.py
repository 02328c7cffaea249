"""The dump's file output: text files, hard links, the binary sidecar and the byte budget.

Every write goes through ``DumpWriter`` so that one place counts bytes and turns an OSError
(a full disk, a quota, a file-size limit) into "stop dumping", never into a failure of the
program being dumped.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Iterable

import numpy as np

from mluverify.dump._index import SIDECAR

# Bytes a value takes as text on average (sign, 6 digits, point, exponent, newline).
TEXT_BYTES_PER_VALUE = 10


class DumpWriter:
    """Writes below ``root``; paths are relative to it."""

    def __init__(self, root: Path, max_bytes: int | None) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.bytes_written = 0
        self._sidecar: IO[bytes] | None = None

    def fits(self, numel: int, itemsize: int) -> bool:
        """Whether a full (level-2) dump of ``numel`` values stays within the budget."""
        return self.has_room(numel * (TEXT_BYTES_PER_VALUE + itemsize))

    def has_room(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more stay within the budget."""
        return self.max_bytes is None or self.bytes_written + nbytes <= self.max_bytes

    def mkdir(self, relative: str) -> None:
        os.makedirs(os.path.join(self.root, relative), exist_ok=True)

    def write_text(self, relative: str, chunks: Iterable[bytes]) -> None:
        with open(os.path.join(self.root, relative), "wb", buffering=1 << 20) as file:
            for chunk in chunks:
                file.write(chunk)
                self.bytes_written += len(chunk)

    def link(self, existing: str, relative: str) -> None:
        """A second name for an identical file (an op's output is the next op's input)."""
        os.link(os.path.join(self.root, existing), os.path.join(self.root, relative))

    def append_exact(self, values: np.ndarray) -> tuple[int, int]:
        """Append raw values to the sidecar: (offset, nbytes)."""
        if self._sidecar is None:
            self._sidecar = open(self.root / SIDECAR, "ab")
        offset = self._sidecar.tell()
        data = np.ascontiguousarray(values).tobytes()
        self._sidecar.write(data)
        self._sidecar.flush()
        self.bytes_written += len(data)
        return offset, len(data)

    def close(self) -> None:
        if self._sidecar is not None:
            sidecar, self._sidecar = self._sidecar, None
            try:
                sidecar.close()
            except OSError:
                # Every append is flushed: only bytes a failed append left in the buffer remain,
                # and that failure was already reported to the caller.
                pass
