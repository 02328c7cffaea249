"""``mluverify report RUN_DIR``: (re)write a run's reports; ``--merge`` only merges the shards
an interrupted run left behind into records.parquet."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="merge a run's shards and write its reports",
                                   description=__doc__)
    parser.add_argument("run_dir", type=Path, help="run directory (e.g. reports/latest)")
    parser.add_argument("--merge", action="store_true", help="only merge shards into records.parquet")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mluverify.report.records import merge

    if args.merge:
        print(f"merged into {merge(args.run_dir)}")
        return 0
    from mluverify.plugin_manager import get_plugin_manager
    from mluverify.report import finish_run

    return finish_run(args.run_dir, pm=get_plugin_manager(), baseline=None, gate=False,
                      regress_factor=1.5, noise_floor=0.0, waivers={}, terminal_write=print)
