"""``FUSED_KERNEL_DEBUG``: save each group's fused outputs beside a reference run of the group.

For group ``MLUFusionGroup{i}`` and output ``j`` the directory gets ``mmouttensor_<group>_<j>``
(the fused result) and ``cpu_jitouttensor_<group>_<j>`` (the group's unfused graph on the CPU in
float32) or ``catch_cnnl_jitouttensor_<group>_<j>`` (the unfused graph op by op on the device),
each loadable with ``torch.load``, plus ``fused_kernel_debug_index.csv`` with one row per output
(in the order the groups ran), the group's ops and the output's rel_mse against the reference.

``recording_group_runs()`` keeps the same data in memory, the ``cpu`` reference, for the calls
of one block, with the value computed inside each group furthest from its graph on the CPU (the
``mlu:cnml`` target judges every group by them).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import torch

from mluverify.device._contextvars import block
from mluverify.device.fusion.errors import DebugDirError
from mluverify.device.fusion.inner import InnerValue

INDEX_NAME = "fused_kernel_debug_index.csv"
REFERENCE_PREFIX = {"cpu": "cpu_jitouttensor", "cnnl": "catch_cnnl_jitouttensor"}


def check_writable(directory: Path) -> Path:
    """Create ``directory`` if needed and prove a file can be written there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise DebugDirError(
            f"FUSED_KERNEL_DEBUG is set but its directory {str(directory)!r} is not writable "
            f"({exc.strerror or exc}); set FUSED_KERNEL_DEBUG_DIR to a writable directory"
        ) from None
    return directory


class DebugWriter:
    """Writes one directory's debug tensors and keeps its index current."""

    def __init__(self, directory: Path, reference: str) -> None:
        self.directory = check_writable(directory)
        self.reference = reference
        self._rows: dict[tuple[str, int], dict] = {}

    def save(self, group: str, fused: list[torch.Tensor], expected: list[torch.Tensor],
             ops: Sequence[str] = (), against: str = "") -> None:
        """Save a group's fused outputs and their references (``ops``: the group's op names;
        ``against``: what the references are where they are not the group's own graph given the
        same inputs, e.g. a real int8 runtime's float model); rewrite the index."""
        from mluverify.judge import metrics

        for j, (actual, reference) in enumerate(zip(fused, expected)):
            fused_file = f"mmouttensor_{group}_{j}"
            reference_file = f"{REFERENCE_PREFIX[self.reference]}_{group}_{j}"
            self._write(fused_file, actual)
            self._write(reference_file, reference)
            self._rows[group, j] = {
                "group": group, "ops": " ".join(ops), "output": j, "shape": "x".join(map(str, actual.shape)),
                "dtype": str(actual.dtype).removeprefix("torch."), "fused_file": fused_file,
                "reference_file": reference_file, "reference": self.reference,
                "rel_mse": metrics(actual, reference)["rel_mse"], "against": against,
            }
        self._write_index()

    def _write(self, name: str, tensor: torch.Tensor) -> None:
        try:
            torch.save(tensor.detach().clone(), self.directory / name)
        except OSError as exc:
            raise DebugDirError(f"cannot write {str(self.directory / name)!r}: {exc}") from None

    def _write_index(self) -> None:
        import pandas as pd

        path = self.directory / INDEX_NAME
        partial = path.with_suffix(".csv.partial")
        pd.DataFrame(list(self._rows.values())).to_csv(partial, index=False)
        os.replace(partial, path)


@dataclass(frozen=True)
class GroupRun:
    """One call of a fusion group: its name, its ops, its fused outputs and the outputs of its
    unfused graph on the CPU in float32 given the same inputs (``FUSED_KERNEL_DEBUG=cpu``'s
    pair), as CPU tensors of their own; ``unjudged``: why there is no reference (its graph
    raised on the CPU), "" when there is one. ``inner``: the value computed inside the group
    furthest from the group's graph on the CPU (``fusion.inner``), None when none was computed
    or it could not be judged (``inner_unjudged`` says why). Without ``outputs`` recorded (see
    ``recording_group_runs``), ``fused`` and ``reference`` are empty."""

    group: str
    ops: tuple[str, ...]
    fused: tuple[torch.Tensor, ...]
    reference: tuple[torch.Tensor, ...]
    unjudged: str = ""
    inner: InnerValue | None = None
    inner_unjudged: str = ""


@dataclass(frozen=True)
class GroupRecording:
    """The block being recorded: the runs so far and whether the groups' outputs are wanted."""

    runs: list[GroupRun]
    outputs: bool


_GROUP_RUNS: contextvars.ContextVar[GroupRecording | None] = contextvars.ContextVar(
    "mluverify_group_runs", default=None)


@contextlib.contextmanager
def recording_group_runs(outputs: bool = True) -> Iterator[list[GroupRun]]:
    """``with recording_group_runs() as runs:`` every fusion group called in the block appends
    its ``GroupRun`` to ``runs``, in the order the groups ran: each call costs a CPU run of the
    group's graph beside the engine, and with ``outputs`` one more of the graph as captured
    (``outputs=False`` where the groups' outputs are judged already: a call fused whole)."""
    with block(_GROUP_RUNS, GroupRecording([], outputs)) as recording:
        yield recording.runs


def group_runs() -> GroupRecording | None:
    """The block being recorded (None outside ``recording_group_runs``)."""
    return _GROUP_RUNS.get()
