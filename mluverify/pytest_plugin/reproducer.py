"""Copy-paste reproducers: the pytest command that re-runs one recorded case alone.

A case's reproducer names everything that decides how it ran: its test id, the ``-p`` plugins
of the command line, its target and device variant, the other ``--mlu-*`` options that change
how cases run, hypothesis' profile and seed when given and, in a property-based test, the
example itself (``--mlu-reproduce-failure VERSION:BLOB`` applies hypothesis'
``@reproduce_failure`` to the test, so exactly that example runs). It writes its report beside
the run's (``<report dir>.repro``), never over it. Run it from the project root (pytest's
rootdir), where node ids are rooted.
"""
from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

# --mlu-* options about where and how a run is reported, not how a case runs; the target and
# the device variant are the case's own.
NOT_REPEATED = frozenset({"mlu_report", "mlu_baseline", "mlu_gate", "mlu_regress_factor", "mlu_noise_floor",
                          "mlu_dump", "mlu_target", "mlu_core_version", "mlu_reproduce_failure",
                          "mlu_cases"})
HYPOTHESIS_OPTIONS = ("hypothesis_profile", "hypothesis_seed")


def add_options(group: Any) -> None:
    """The option a reproducer of a property-based case uses (in the ``mluverify`` group)."""
    group.addoption("--mlu-reproduce-failure", default=None, metavar="VERSION:BLOB",
                    help="run only this hypothesis example in the selected property-based tests "
                         "(what @reproduce_failure(VERSION, BLOB) does; written into reproducers)")


def reproducer_command(config: Any, nodeid: str, target: object, core_version: str, report_dir: Path) -> str:
    """The shell command re-running the case of test ``nodeid`` on ``target`` (and device
    variant ``core_version``) alone, with the run's options that change how cases run."""
    return run_reproducers(config, report_dir).command(nodeid, target, core_version)


@dataclass(frozen=True)
class RunReproducers:
    """What every reproducer of one run shares, shell-quoted once (a run makes one per case):
    the command before the test id, the run's options that change how cases run, and the
    report option. ``command`` adds a case's test id, target, device variant and example."""

    head: str
    options: tuple[str, ...]
    report: str

    def command(self, nodeid: str, target: object, core_version: str) -> str:
        """The reproducer of the case of test ``nodeid`` on ``target`` (and ``core_version``)."""
        case = [nodeid, f"--mlu-target={target}"] + ([f"--mlu-core-version={core_version}"] if core_version else [])
        example = hypothesis_example()
        shown = [f"--mlu-reproduce-failure={example}"] if example else []
        return " ".join([self.head, shlex.join(case), *self.options, *map(shlex.quote, shown), self.report])


def run_reproducers(config: Any, report_dir: Path) -> RunReproducers:
    """The shared part of the reproducers of the run of ``config`` reporting into ``report_dir``."""
    plugins = [part for name in _command_line_plugins(config) for part in ("-p", name)]
    # ``python -m pytest``: like the run, it finds ``-p`` plugins and conftests of the current
    # directory (the ``pytest`` script does not put it on sys.path)
    head = ["python", "-m", "pytest", "-p", "mluverify", *plugins]
    options = _case_options(vars(config.option))
    options += [f"--{name.replace('_', '-')}={config.getoption(name, None)}" for name in HYPOTHESIS_OPTIONS
                if config.getoption(name, None) is not None]
    return RunReproducers(shlex.join(head), tuple(map(shlex.quote, options)),
                          shlex.quote(f"--mlu-report={_repro_dir(report_dir, config.rootpath)}"))


def _command_line_plugins(config: Any) -> list[str]:
    """The ``-p`` plugins of the run, once each, less mluverify and those the ini file's
    ``addopts`` gives again anyway."""
    ini = config.getini("addopts")
    from_ini = {ini[i + 1] for i, arg in enumerate(ini[:-1]) if arg == "-p"}
    names = [name for name in config.getoption("plugins", None) or [] if name not in from_ini | {"mluverify"}]
    return list(dict.fromkeys(names))


def _case_options(options: dict[str, Any]) -> list[str]:
    """Every set ``--mlu-*`` option that changes how a case runs, as ``--name=value``."""
    argv = []
    for name, value in sorted(options.items()):
        if not name.startswith("mlu_") or name in NOT_REPEATED or value in (None, False, [], ()):
            continue
        flag = f"--{name.replace('_', '-')}"
        values = value if isinstance(value, (list, tuple)) else [value]
        argv += [flag if value is True else f"{flag}={item}" for item in values]
    return argv


def _repro_dir(report_dir: Path, rootpath: Path) -> str:
    repro = Path(report_dir).with_name(Path(report_dir).name + ".repro")
    try:
        return str(repro.relative_to(rootpath))
    except ValueError:
        return str(repro)


def hypothesis_example() -> str | None:
    """``VERSION:BLOB`` of the hypothesis example running now (the choices it drew so far,
    which is all of them when verify fails in it), or None outside a property-based test."""
    hypothesis = sys.modules.get("hypothesis")
    if hypothesis is None or not hypothesis.currently_in_test_context():
        return None
    from hypothesis.control import current_build_context
    from hypothesis.core import encode_failure

    choices = current_build_context().data.choices
    return f"{hypothesis.__version__}:{encode_failure(choices).decode('ascii')}"


def apply_example(items: Sequence[Any], example: str) -> None:
    """Decorate the selected property-based tests with ``@reproduce_failure`` for ``example``
    (``VERSION:BLOB``), as a user would by hand."""
    import pytest
    from hypothesis import is_hypothesis_test, reproduce_failure

    version, _, blob = example.partition(":")
    if not version or not blob:
        raise pytest.UsageError(f"--mlu-reproduce-failure={example!r}: expected VERSION:BLOB, as written "
                                f"in a record's reproducer")
    for item in items:
        function = getattr(item, "function", None)
        if function is not None and is_hypothesis_test(function):
            reproduce_failure(version, blob.encode("ascii"))(function)
