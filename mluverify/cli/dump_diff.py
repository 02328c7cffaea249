"""``mluverify dump-diff DUMP_DIR``: the per-op error table of a ``use_cpu`` dump."""
from __future__ import annotations

import argparse

from mluverify.judge import POLICIES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-diff", help="per-op own / inherited error of a dump; names the first offender",
        description="Per-op error table of a dump made with use_cpu=True: each op's own error "
                    "(device vs the CPU on the same inputs) beside the error it inherited; the "
                    "first op whose own error breaks the tolerance is named with a reproducer. "
                    "Exit status 1 when an op is blamed, 3 when the case failed (or the dump's "
                    "output breaks the tolerance) but no op's own error explains it, 0 otherwise.")
    parser.add_argument("dump_dir", metavar="DUMP_DIR", help="a dump made with use_cpu=True")
    parser.add_argument("--mode", default=None, choices=[m for m in POLICIES if m != "exact"],
                        help="tolerance policy judging each op's own error (default: for a run's "
                             "dump, the dumped case's own resolved tolerance: marker, hook, config "
                             "or policy; else cnnl)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where to write dump_diff.{csv,md,html} (default: DUMP_DIR)")
    parser.add_argument("--all-ops", action="store_true",
                        help="also list the harness's own copies and device moves (clone, detach, "
                             "_to_copy, ...), left out by default")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    """Write the reports; print the headline, the reproducer and the page's path."""
    from mluverify.dump import EXIT_STATUS, dump_diff, shown_table
    from mluverify.report.dump_diff import case_error, headline, write_dump_diff_pages

    diff = dump_diff(args.dump_dir, mode=args.mode, case=case_error(args.dump_dir))
    paths = write_dump_diff_pages(diff, args.out or args.dump_dir, all_ops=args.all_ops)
    shown = len(shown_table(diff, args.all_ops))
    print(headline(diff))
    if diff.reproducer:
        print(diff.reproducer)
    print(f"{shown} of {len(diff.table)} dumped ops listed"
          + ("" if shown == len(diff.table) else " (the harness's copies and moves left out; --all-ops lists them)"))
    print(f"full page: {paths[2]}")
    return EXIT_STATUS[diff.verdict]

