"""``mluverify diff BASE NEW``: regression report of run NEW against run BASE.

Writes ``diff.md`` and ``diff.html`` (into ``--out``, default NEW), prints the verdict, the
cases per status and the path of the page, and exits 1 when a case is a new failure, worsened
or missing, else 0.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mluverify.cli._options import key_number


def register(subparsers: "argparse._SubParsersAction") -> None:
    parser = subparsers.add_parser("diff", help="regression report of run NEW against run BASE",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, metavar="BASE", help="baseline run directory or records.parquet")
    parser.add_argument("new", type=Path, metavar="NEW", help="new run directory or records.parquet")
    parser.add_argument("--out", type=Path, help="where to write diff.md and diff.html (default: NEW's directory)")
    parser.add_argument("--regress-factor", type=key_number("regress_factor"), default=None,
                        help="a case worsened when its judged metric grew by more than this factor "
                             "(default: [tool.mluverify] regress_factor)")
    parser.add_argument("--noise-floor", type=key_number("noise_floor"), default=None,
                        help="values below this are compared as if equal to it "
                             "(default: [tool.mluverify] noise_floor)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mluverify.report.diff import diff_runs
    from mluverify.report.loading import load
    from mluverify.report.pages import diff_documents, diff_text
    from mluverify.core.config import project_settings
    from mluverify.report.finish import baseline_spread, write_files

    settings = project_settings()
    result = diff_runs(load(args.base), load(args.new),
                       regress_factor=_given_or(args.regress_factor, settings.regress_factor),
                       noise_floor=_given_or(args.noise_floor, settings.noise_floor),
                       spread=baseline_spread(args.base, settings))
    markdown, page = diff_documents(result, str(args.base), str(args.new))
    out = args.out or (args.new if args.new.is_dir() else args.new.parent)
    paths = write_files(out, {"diff.md": markdown, "diff.html": page})
    print(f"mluverify diff: {'REGRESSED' if result.regressed else 'no regression'}; {diff_text(result)}")
    print(f"full page: {paths[1]} (also {paths[0]})")
    return 1 if result.regressed else 0


def _given_or(value: float | None, default: float) -> float:
    """An option's value when given (0 included), else the setting."""
    return default if value is None else value
