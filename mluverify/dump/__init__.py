"""The Dumper, dump readers and captures: per-op dumps in Cambricon's layout, turned into
pandas tables, and model runs turned into replayable per-op cases.

Importing this package does not register the ``mlu`` device; the Dumper and ``capture`` work
for the ops of any device. The dump-diff reports are written by ``mluverify.report.dump_diff``.
"""
from __future__ import annotations

from mluverify.dump._capture import Capture, capture
from mluverify.dump._case import dump_case
from mluverify.dump._cases import CasesMeta, read_cases
from mluverify.dump._diff import (
    EXIT_STATUS,
    HARNESS_OPS,
    CaseError,
    DumpDiff,
    OpTolerance,
    dump_diff,
    op_tolerance,
    shown_table,
)
from mluverify.dump._dumper import Dumper, DumpSettings, undumped
from mluverify.dump._groups import first_wrong_group, fused_kernel_debug, group_table
from mluverify.dump._index import load, load_values
from mluverify.dump._replay import Replay, ReplayCase, read_replay_cases

__all__ = ["Capture", "CaseError", "CasesMeta", "DumpDiff", "DumpSettings", "Dumper", "EXIT_STATUS", "HARNESS_OPS",
           "OpTolerance", "Replay", "ReplayCase", "capture", "dump_case", "dump_diff", "load", "load_values",
           "first_wrong_group", "fused_kernel_debug", "group_table", "op_tolerance", "read_cases",
           "read_replay_cases", "shown_table", "undumped"]
