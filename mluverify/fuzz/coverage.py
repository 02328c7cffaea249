"""What a campaign has judged, per target: how often each (op, operand dtype), and the steering
of later draws towards the least judged.

A corpus keeps its coverage in ``coverage/coverage.json`` (a folder of its own: the corpus's
``*.json`` files are its findings): one entry per campaign (a run id), each the
counts per target, op and dtype of the programs it judged (a node counts once per judged
program, by its op and its first operand's dtype; shrinking's re-runs do not count). A corpus's
coverage is the sum of its entries. Merging unites the entries by run id, so shards that each
started from a copy of one corpus add the copy's counts once, not once per shard.

``Steering`` holds the counts a search starts from (a snapshot: hypothesis replays a search's
draws while it shrinks, so its weights must not move under it). Each choice among ops, operands
and cast dtypes is weighted by ``STEER_RANGE x (1 + least count) / (1 + its count)``, rounded up
and times the op's own weight: a never-judged choice beside a much-judged one is drawn up to
``STEER_RANGE`` times as often. Where all counts are equal (an empty coverage) the weights are
the unsteered ones, so a seed draws what it drew before coverage existed.
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TypeVar

from mluverify.errors import InvalidArgument

COVERAGE_FILE = "coverage/coverage.json"
FORMAT = "mluverify-fuzz-coverage"
VERSION = 1
STEER_RANGE = 8
Item = TypeVar("Item")
# Per target: judged programs' nodes counted by (op, operand dtype).
Coverage = dict[str, Counter]


@dataclass(frozen=True)
class Steering:
    """Draw weights from judged counts (``counts``: (op, dtype) -> nodes judged)."""

    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @cached_property
    def by_dtype(self) -> Counter:
        """Nodes judged per operand dtype, over all ops."""
        totals: Counter = Counter()
        for (_, dtype), count in self.counts.items():
            totals[dtype] += count
        return totals

    def weighted(self, items: Sequence[Item], bases: Sequence[int], counts: Sequence[int]) -> list[Item]:
        """``items`` repeated by their steered weights (a list for ``st.sampled_from``)."""
        if len(set(counts)) <= 1:
            return [item for item, base in zip(items, bases) for _ in range(base)]
        least = min(counts)
        weights = [base * math.ceil(STEER_RANGE * (1 + least) / (1 + count)) for base, count in zip(bases, counts)]
        common = math.gcd(*weights)
        return [item for item, weight in zip(items, weights) for _ in range(weight // common)]

    def op_count(self, op: str, dtypes: Iterable[str]) -> int:
        """How often ``op`` was judged on the least judged of ``dtypes`` (its operands' here)."""
        return min(self.counts.get((op, dtype), 0) for dtype in dtypes)

    def dtypes(self, choices: Sequence[str]) -> list[str]:
        """A cast's dtype choices, steered towards the dtypes least judged as operands."""
        return self.weighted(choices, [1] * len(choices), [self.by_dtype[d] for d in choices])


def dtype_name(dtype: Any) -> str:
    """``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def node_dtypes(program: Any) -> list[str]:
    """Each node's first operand's dtype (the program run on meta tensors: no data)."""
    import torch

    values = program.callable(every_value=True)(*(torch.empty(s, device="meta") for s in program.inputs))
    float32 = dtype_name(torch.float32)
    return [float32 if node.args[0].startswith("x") else dtype_name(values[int(node.args[0][1:])].dtype)
            for node in program.nodes]


def count_program(counts: Counter, program: Any) -> None:
    """Add one judged program's nodes to ``counts``."""
    counts.update(zip(program.ops, node_dtypes(program)))


def read_runs(corpus: str | Path) -> dict[str, Coverage]:
    """The coverage entries of a corpus directory by run id ({} where it has none yet)."""
    path = Path(corpus) / COVERAGE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"not {FORMAT} version {VERSION}")
        return {run: {target: Counter({(op, dtype): int(n) for op, by_dtype in ops.items()
                                       for dtype, n in by_dtype.items()})
                      for target, ops in targets.items()}
                for run, targets in data["runs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidArgument(f"coverage file {path}: unreadable ({exc}); move it away to start the "
                              f"corpus's coverage afresh") from None


def totals(runs: Mapping[str, Coverage]) -> Coverage:
    """Per target, the counts of all runs added up."""
    summed: Coverage = {}
    for coverage in runs.values():
        for target, counts in coverage.items():
            summed.setdefault(target, Counter()).update(counts)
    return summed


def _write_runs(corpus: str | Path, runs: Mapping[str, Coverage]) -> None:
    """Write the entries, whole or not at all (a campaign stopped mid-write keeps the last file)."""
    as_json = {run: {target: _nested(counts) for target, counts in coverage.items()} for run, coverage in runs.items()}
    path = Path(corpus) / COVERAGE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({"format": FORMAT, "version": VERSION, "runs": as_json}, indent=1, sort_keys=True))
    os.replace(partial, path)


def _nested(counts: Counter) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for (op, dtype), count in sorted(counts.items()):
        nested.setdefault(op, {})[dtype] = count
    return nested


def record_run(corpus: str | Path, run: str, coverage: Coverage) -> None:
    """Set run ``run``'s entry of the corpus's coverage to ``coverage``."""
    runs = read_runs(corpus)
    runs[run] = coverage
    _write_runs(corpus, runs)


def merge_coverage(sources: Iterable[str | Path], out: str | Path) -> int:
    """Unite the coverage entries of ``sources`` into ``out``'s (by run id); the runs now held."""
    runs = read_runs(out)
    for source in sources:
        runs.update(read_runs(source))
    if runs:  # corpora without coverage (kept findings alone) get no coverage file
        _write_runs(out, runs)
    return len(runs)


def coverage_rows(corpus: str | Path, ops: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One row per target, op and dtype judged in ``corpus``, and one (dtype ``-``, judged 0)
    per op of ``ops`` a target never judged: least judged first."""
    rows = []
    for target, counts in totals(read_runs(corpus)).items():
        rows += [{"target": target, "op": op, "dtype": dtype, "judged": n} for (op, dtype), n in counts.items()]
        reached = {op for op, _ in counts}
        rows += [{"target": target, "op": op, "dtype": "-", "judged": 0} for op in ops if op not in reached]
    return sorted(rows, key=lambda row: (row["target"], row["judged"], row["op"], row["dtype"]))


__all__ = ["COVERAGE_FILE", "Coverage", "STEER_RANGE", "Steering", "count_program", "coverage_rows", "dtype_name",
           "merge_coverage", "node_dtypes", "read_runs", "record_run", "totals"]
