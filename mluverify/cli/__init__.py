"""The ``mluverify`` command, a front end beside the pytest plugin.

``mluverify run`` is pytest with the plugin (``pytest.main``); the other sub-commands work on
runs and dumps through the report and the Dumper, each command building its own plugin manager
where it calls hooks. One module per sub-command in this package, each exposing
``register(subparsers)``, which adds its parser and sets ``func`` (``args -> exit code``).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from mluverify.errors import MluverifyError

COMMANDS: tuple[str, ...] = (
    "mluverify.cli.run",
    "mluverify.cli.report",
    "mluverify.cli.diff",
    "mluverify.cli.audit",
    "mluverify.cli.baseline",
    "mluverify.cli.durations",
    "mluverify.cli.dump_diff",
    "mluverify.cli.capture",
    "mluverify.cli.exec",
    "mluverify.cli.fuzz",
    "mluverify.cli.expectations",
    "mluverify.cli.parity",
    "mluverify.cli.tune",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mluverify", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is passed on untouched (to pytest, or to an exec'd script).
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    args.passthrough = passthrough
    try:
        return int(args.func(args) or 0)
    except MluverifyError as exc:
        print(f"mluverify {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
