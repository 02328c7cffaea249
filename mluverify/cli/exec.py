"""``mluverify exec script.py [args]``: run a torch_mlu script unchanged on the emulated MLU.

The command builds its own plugin manager (built-ins and entry points) and configures it for
the script's run, so an installed plugin's device kernels apply to the script too.
"""
from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "exec", help="run a torch_mlu script on the emulated MLU", description=__doc__
    )
    parser.add_argument("script", help="the Python script to run as __main__")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mluverify.compat import exec_script
    from mluverify.core.plugin_manager import configured_plugin_manager

    with configured_plugin_manager():
        return exec_script(args.script, [*args.args, *getattr(args, "passthrough", [])])
