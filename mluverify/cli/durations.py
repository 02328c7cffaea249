"""``mluverify durations RUN...``: write pytest-split's ``.test_durations`` from the records.

Each test's duration is the sum of its cases' ``duration_s`` and ``compile_s`` (a test that calls
``verify`` several times records ``nodeid``, ``nodeid#2``, ...). CI slices a suite across
machines with ``pytest --splits N --group I --durations-path .test_durations``; the file is
what balances the slices (see docs/configuration.md, "Several machines").
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_OUT = Path(".test_durations")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("durations", help="write pytest-split's .test_durations from runs",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directories or records.parquet files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write it (default: {DEFAULT_OUT})")
    parser.set_defaults(func=run)


def test_durations(frame: "pd.DataFrame") -> dict[str, float]:
    """Seconds per pytest node id: the sum over its cases of ``duration_s`` + ``compile_s``."""
    test_ids = frame["case_id"].str.split("#", n=1).str[0]
    seconds = frame["duration_s"].fillna(0.0) + frame["compile_s"].fillna(0.0)
    return {test_id: round(float(total), 6) for test_id, total in seconds.groupby(test_ids).sum().items()}


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from mluverify.errors import RecordsError
    from mluverify.report.loading import load

    durations = test_durations(pd.concat([load(path) for path in args.runs], ignore_index=True))
    if not durations:
        raise RecordsError(f"{', '.join(map(str, args.runs))} hold no records: no durations to write")
    try:
        args.out.write_text(json.dumps(durations, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise RecordsError(f"cannot write {args.out}: {exc.strerror}") from None
    print(f"mluverify durations: {len(durations)} tests, {sum(durations.values()):.1f} s in all -> {args.out}")
    return 0
