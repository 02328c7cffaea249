"""``mluverify dump-diff DUMP_DIR``: the per-op error table of a ``use_cpu`` dump."""
from __future__ import annotations

import argparse

from mluverify.compare import POLICIES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-diff", help="per-op own / inherited error of a dump; names the first offender",
        description="Per-op error table of a dump made with use_cpu=True: each op's own error "
                    "(device vs the CPU on the same inputs) beside the error it inherited; the "
                    "first op whose own error breaks the tolerance is named with a reproducer. "
                    "Exit code 1 when an op is blamed.")
    parser.add_argument("dump_dir", metavar="DUMP_DIR", help="a dump made with use_cpu=True")
    parser.add_argument("--mode", default="cnnl", choices=[m for m in POLICIES if m != "exact"],
                        help="tolerance policy judging each op's own error (default: cnnl)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where to write dump_diff.{csv,md,html} (default: DUMP_DIR)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    """Write the reports, print the headline and reproducer; exit 1 if an op is blamed."""
    from mluverify.dump import dump_diff, write_reports
    from mluverify.dump._diff import headline

    diff = dump_diff(args.dump_dir, mode=args.mode)
    paths = write_reports(diff, args.out or args.dump_dir)
    print(headline(diff))
    if diff.reproducer:
        print(diff.reproducer)
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0 if diff.first_offender is None else 1
