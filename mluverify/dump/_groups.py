"""Fusion groups seen from outside: each group's own error, from ``FUSED_KERNEL_DEBUG=cpu``.

A fused run (target ``mlu:cnml``) cannot be dumped op by op: under the Dumper's modes the model
cannot be captured, so it runs layer by layer and a fused kernel never runs. What a fused run
shows instead is each fusion group's outputs beside the outputs of the group's own graph on
the CPU given the same inputs, which the device saves under ``FUSED_KERNEL_DEBUG=cpu``
(docs/fusion.md). ``fused_kernel_debug`` sets that up for a block; ``group_table`` judges every
saved output; the fuzzer's culprit search and ``dump-diff`` both read it.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Sequence

import pandas as pd
import torch

from mluverify.judge import Tolerance, compare

# The index FUSED_KERNEL_DEBUG writes beside the saved tensors (the device's
# ``mluverify.device.fusion.debug.INDEX_NAME``: a documented file name, not an import of the device).
DEBUG_INDEX = "fused_kernel_debug_index.csv"
GROUP_COLUMNS = ("group", "output", "ops", "shape", "dtype", "own_value", "bound", "own_passed", "reason",
                 "fused_file", "reference_file", "against")
# What a group's output is compared with, unless its index says otherwise (a real int8 runtime's layer).
OWN_GRAPH = "the group's own graph on the CPU"


@contextlib.contextmanager
def fused_kernel_debug(directory: str | os.PathLike[str], fallback: Sequence[str] = ()) -> Iterator[Path]:
    """For the block, the fused engine saves each group's outputs and its CPU graph's into
    ``directory`` (``FUSED_KERNEL_DEBUG=cpu``); ``fallback``: ops kept out of every group
    (``DEBUG_FORCED_FALLBACK_OPS``). The engine reads these environment variables when a program
    is built, so they are set for the block and what was there is restored after."""
    values = {"FUSED_KERNEL_DEBUG": "cpu", "FUSED_KERNEL_DEBUG_DIR": str(directory)}
    if fallback:
        values["DEBUG_FORCED_FALLBACK_OPS"] = ",".join(fallback)
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield Path(directory)
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def group_table(directory: str | os.PathLike[str], tolerance: Tolerance) -> pd.DataFrame:
    """One row per group output saved in ``directory``, in the order the groups ran: the
    group, its ops, the output's own error (fused vs the group's graph on the CPU, judged by
    ``tolerance``), whether it passed, and the two files. Empty when no group ran."""
    directory = Path(directory)
    index = directory / DEBUG_INDEX
    if not index.is_file():
        return pd.DataFrame(columns=GROUP_COLUMNS)
    rows = []
    for row in pd.read_csv(index, keep_default_na=False, dtype={"group": str, "ops": str, "against": str}).to_dict("records"):
        fused, reference = (torch.load(directory / row[f"{side}_file"]) for side in ("fused", "reference"))
        if fused.is_floating_point():  # the reference ran in float32 whatever the group's dtype
            fused, reference = fused.float(), reference.float()
        verdict = compare(fused, reference, tolerance=tolerance)
        rows.append({"group": row["group"], "output": int(row["output"]), "ops": row["ops"], "shape": row["shape"],
                     "dtype": row["dtype"], "own_value": verdict.value, "bound": verdict.bound,
                     "own_passed": verdict.passed, "reason": verdict.reason,
                     "fused_file": str(directory / row["fused_file"]),
                     "reference_file": str(directory / row["reference_file"]),
                     "against": row.get("against") or OWN_GRAPH})
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)


def first_wrong_group(table: pd.DataFrame) -> pd.Series | None:
    """The row of the first group output (in the order the groups ran) whose own error breaks
    its bound; None when none does."""
    wrong = table[~table["own_passed"].astype(bool)]
    return None if wrong.empty else wrong.iloc[0]
