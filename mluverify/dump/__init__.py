"""The Dumper and dump readers: per-op dumps in Cambricon's layout, turned into pandas tables.

Importing this package does not register the ``mlu`` device; the Dumper works for the ops
of any device.
"""
from __future__ import annotations

from mluverify.dump._case import dump_case
from mluverify.dump._diff import DumpDiff, dump_diff, write_reports
from mluverify.dump._dumper import Dumper, DumpSettings
from mluverify.dump._index import load, load_values

__all__ = ["DumpDiff", "DumpSettings", "Dumper", "dump_case", "dump_diff", "load",
           "load_values", "write_reports"]
