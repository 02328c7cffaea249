"""``mluverify capture SCRIPT [args]``: run a script and record its aten ops as replayable cases."""
from __future__ import annotations

import argparse
import re
import sys
import traceback
from pathlib import Path

from mluverify.errors import InvalidArgument

_SIZE = re.compile(r"(\d+)\s*([kmg]?)i?b?", re.IGNORECASE)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "capture", help="record every aten op a script runs as deduplicated, replayable cases",
        description="Run SCRIPT (as `mluverify exec` does: torch_mlu scripts run unchanged) and "
                    "record every aten op it runs, forward and backward, deduplicated by op and "
                    "normalised arguments, into a cases directory (cases.parquet + values.bin) "
                    "that `pytest -p mluverify --mlu-cases DIR` replays on every target.")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="cases directory to write (default: ./cases/<model>); an existing one "
                             "is never overwritten: DIR_1, DIR_2, ... is used")
    parser.add_argument("--model", default=None,
                        help="the model's name in the cases (default: the script's name)")
    parser.add_argument("--max-bytes", default="16MiB", type=byte_size, metavar="SIZE",
                        help="budget of real input values kept (e.g. 512KiB, 16MiB, 0); past it "
                             "cases keep a recipe to synthesise their inputs (default: 16MiB)")
    parser.add_argument("script", help="the Python script to run as __main__")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    parser.set_defaults(func=run)


def byte_size(text: str) -> int:
    """``"512KiB"`` -> 524288: a number of bytes with an optional K / M / G (powers of 1024)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 4096, 512KiB or 16MiB")
    number, unit = match.groups()
    return int(number) << {"": 0, "k": 10, "m": 20, "g": 30}[unit.lower()]


def run(args: argparse.Namespace) -> int:
    """Run the script under ``capture``; exit with the script's code (1 if it raised)."""
    from mluverify.compat import exec_script
    from mluverify.dump import capture

    script = Path(args.script)
    if not script.is_file():
        raise InvalidArgument(f"script {args.script!r} does not exist or is not a file")
    model = args.model or script.stem
    recording = capture(args.out or Path("cases") / model, model=model, max_bytes=args.max_bytes)
    recording.__enter__()  # a bad --out fails here, before the script runs
    try:
        code = exec_script(script, [*args.args, *getattr(args, "passthrough", [])])
    except BaseException as exc:  # the script raised: keep the cases recorded up to the error
        recording.__exit__(type(exc), exc, exc.__traceback__)
        if not isinstance(exc, Exception):
            _summary(recording, 1)
            raise
        traceback.print_exception(exc)
        _summary(recording, 1)
        return 1
    recording.__exit__(None, None, None)
    _summary(recording, code)
    return code


def _summary(recording, code: int) -> None:
    what = f"{recording.cases} unique cases of {recording.ops} ops into {recording.path}"
    if recording.error:
        print(f"mluverify capture: the script raised {recording.error}; kept the {what} "
              f"recorded up to the error", file=sys.stderr)
    else:
        print(f"mluverify capture: wrote {what}" + (f" (script exit code {code})" if code else ""))
