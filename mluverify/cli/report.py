"""``mluverify report RUN``: merge a run's shards (an interrupted run leaves some) and (re)write
its reports. ``mluverify report --merge RUN... --out DIR``: merge the runs several machines made
of one suite (CI slices) into the run DIR — refusing overlapping case ids and runs of different
versions — and report it; ``--baseline`` / ``--gate`` gate the merged run.

Regress factor, noise floor, waivers and allowed statuses come from ``[tool.mluverify]``. A run
that did not finish (killed, interrupted, stopped early) is reported as incomplete and exits 1
unless ``--allow-incomplete``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mluverify.errors import InvalidArgument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="merge runs or a run's shards and write the reports",
                                   description=__doc__)
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directory (e.g. reports/latest)")
    parser.add_argument("--merge", action="store_true",
                        help="merge the RUNs into the run --out (one RUN without --out: its shards, in place)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="the merged run's directory (built beside it, then swapped in; the previous "
                             "one is kept as DIR.prev)")
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR", help="baseline run to diff against")
    parser.add_argument("--gate", action="store_true", help="exit 1 when the gate fails")
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="exit 0 (and let the gate pass) for a run that did not finish; it is still "
                             "reported as incomplete")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if len(args.runs) > 1 and not args.merge:
        raise InvalidArgument(f"{len(args.runs)} runs given: pass --merge --out DIR to merge them, or one run")
    runs = [_with_records(run_dir) for run_dir in args.runs]
    if args.merge and (args.out is not None or len(runs) > 1):
        if args.out is None:
            raise InvalidArgument("--merge with several runs needs --out DIR, the merged run's directory")
        return _merge_into(runs, args.out, args)
    return _finish(runs[0], args)


def _with_records(run_dir: Path) -> Path:
    """``run_dir`` if it holds records: its ``records.parquet``, or shards to merge (a killed
    run). Without either it is refused, naming the file, before any page is written: its pages
    are not rewritten as a run that verified nothing."""
    from mluverify.errors import RecordsError
    from mluverify.report.records import RECORDS_FILE, SHARD_DIR, check_run_dir
    from mluverify.report.rundir import holds_records

    run_dir = check_run_dir(run_dir)
    if not holds_records(run_dir):
        raise RecordsError(f"{run_dir / RECORDS_FILE} is missing and {run_dir / SHARD_DIR} holds no record to "
                           f"merge: nothing to report (its pages were left as they are)")
    return run_dir


def _merge_into(sources: list[Path], out: Path, args: argparse.Namespace) -> int:
    """Build the merged run beside ``out`` and swap it in, as a pytest run would."""
    from mluverify.report.merging import merge_runs
    from mluverify.report.rundir import RunDirectory

    directory = RunDirectory(out)
    if out.resolve() in {source.resolve() for source in sources}:
        raise InvalidArgument(f"--out {out} is one of the runs to merge; merge into a new directory")
    staging = directory.claim()
    try:
        merge_runs(sources, staging)
        print(f"mluverify: merged {len(sources)} runs into {out}")
        return _finish(staging, args, publish=directory.publish)
    except BaseException:
        directory.discard()
        raise
    finally:
        directory.release()


def _finish(run_dir: Path, args: argparse.Namespace, publish=None) -> int:
    from mluverify.core.config import project_settings
    from mluverify.core.plugin_manager import configured_plugin_manager
    from mluverify.report import finish_run
    from mluverify.report.records import read_selected

    with configured_plugin_manager() as pm:  # this command's own: built-ins and entry points
        return finish_run(run_dir, pm=pm, settings=project_settings(),
                          baseline=args.baseline, gate=args.gate, terminal_write=print,
                          selected=read_selected(run_dir), publish=publish,
                          allow_incomplete=args.allow_incomplete)
