"""What ``pytest -p mluverify`` adds: the ``--mlu-*`` options, markers and the ``verify`` fixture.

Thin by design: judging and recording live in ``mluverify.session``, reports and gating in
``mluverify.report``. State is kept under StashKeys on the pytest config. Modules that
implement ``mluverify_*`` hooks and are registered with pytest (``-p module``, conftest.py)
are forwarded to mluverify's own plugin manager.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from mluverify.case import Case, Target
from mluverify.config import Settings, Waiver, load_settings, make_waiver, matches_case_id
from mluverify.errors import MluverifyError
from mluverify.session import Session

session_key = pytest.StashKey[Session]()
settings_key = pytest.StashKey[Settings]()
pytest_plugins = ["mluverify.pytest_cases"]  # --mlu-cases: captured cases as items

MARKERS = (
    "mlu_op(name): the op a case verifies (default: the verified callable's name)",
    "mlu_tolerance(bound, metric='rel_mse'): this test's tolerance; overrides hook, config and policy",
    "mlu_waiver(reason, until): a known deviation; failures are recorded as waived until the date YYYY-MM-DD",
    "mlu_targets(*targets): run this test only on these targets ('backend:mode')",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mluverify", "mluverify: accelerator verification")
    group.addoption("--mlu-target", action="append", default=None, metavar="BACKEND:MODE",
                    help="target to verify on (repeatable); default: [tool.mluverify] targets")
    group.addoption("--mlu-report", default=None, metavar="DIR",
                    help="run report directory (default: [tool.mluverify] report_dir, reports/latest)")
    group.addoption("--mlu-baseline", default=None, metavar="DIR", help="baseline run to gate against")
    group.addoption("--mlu-gate", action="store_true", help="fail the session on accuracy regressions")
    group.addoption("--mlu-regress-factor", type=float, default=None, metavar="X",
                    help="a judged metric growing more than X times its baseline fails the gate (1.5)")
    group.addoption("--mlu-noise-floor", type=float, default=None, metavar="V",
                    help="metric values below V are noise for the regression rule")
    group.addoption("--mlu-dump", choices=("off", "fail"), default="off",
                    help="'fail': dump every failing case (level 1, CPU re-run) into the report dir")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:
        settings = load_settings(config.rootpath / "pyproject.toml")
        session = _new_session(config, settings)
        for target in _requested_targets(config, settings):
            session.resolve(target)
    except MluverifyError as exc:
        raise pytest.UsageError(f"mluverify: {exc}") from None
    config.stash[settings_key] = settings
    config.stash[session_key] = session
    config.pluginmanager.register(_PluginForwarder(session), "mluverify-forwarder")


def _new_session(config: pytest.Config, settings: Settings) -> Session:
    from mluverify.plugin_manager import get_plugin_manager, register

    # The process-wide manager: the emulated device takes its kernels from it too.
    pm = get_plugin_manager()
    for plugin in _mluverify_plugins(config.pluginmanager.get_plugins()):
        register(pm, plugin)
    run_dir = Path(config.getoption("mlu_report") or config.rootpath / settings.report_dir)
    if _is_worker(config):
        return Session(pm, settings, run_dir, run_id=config.workerinput["mluverify_run_id"],
                       worker=config.workerinput["workerid"],
                       dump_failures=config.getoption("mlu_dump") == "fail")
    session = Session(pm, settings, _prepare_run_dir(run_dir),
                      dump_failures=config.getoption("mlu_dump") == "fail")
    from mluverify.report.records import run_metadata, write_metadata

    write_metadata(run_dir, run_metadata(session.run_id))
    return session


def _mluverify_plugins(plugins) -> list[Any]:
    import mluverify

    return [p for p in plugins if p is not mluverify and any(n.startswith("mluverify_") for n in dir(p))]


def _prepare_run_dir(run_dir: Path) -> Path:
    """Empty a previous run's directory (only one that holds a run), or make a new one."""
    from mluverify.errors import RecordsError
    from mluverify.report.records import META_FILE

    if run_dir.exists() and any(run_dir.iterdir()):
        if not (run_dir / META_FILE).exists():
            raise RecordsError(f"report directory {run_dir} is not empty and holds no mluverify run "
                               f"({META_FILE}); pass an empty or new --mlu-report directory")
        shutil.rmtree(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / ".write-test").touch()
        (run_dir / ".write-test").unlink()
    except OSError as exc:
        raise RecordsError(f"report directory {run_dir} is not writable: {exc.strerror}") from None
    return run_dir


class _PluginForwarder:
    """Forwards plugins registered with pytest after start-up (conftest.py files) that
    implement mluverify hooks to mluverify's plugin manager."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pytest_plugin_registered(self, plugin: Any) -> None:
        from mluverify.plugin_manager import register

        if _mluverify_plugins([plugin]):
            register(self.session.pm, plugin)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker records under the controller's run id."""
    node.workerinput["mluverify_run_id"] = node.config.stash[session_key].run_id


def _requested_targets(config: pytest.Config, settings: Settings) -> list[str]:
    return config.getoption("mlu_target") or list(settings.targets)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mlu_target" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash[session_key]
    marker = metafunc.definition.get_closest_marker("mlu_targets")
    requested = _requested_targets(metafunc.config, metafunc.config.stash[settings_key])
    if marker is not None:
        requested = [t for t in requested if t in marker.args]
    params = []
    for text in requested:
        target, backend = session.resolve(text)
        reason = backend.unavailable_reason()
        marks = [pytest.mark.skip(reason=f"target {target} unavailable: {reason}")] if reason else []
        params.append(pytest.param(target, id=str(target), marks=marks))
    if not params:
        params = [pytest.param(None, id="no-target",
                               marks=pytest.mark.skip(reason=f"none of the requested targets {requested} "
                                                             f"is in mlu_targets{marker.args}"))]
    metafunc.parametrize("mlu_target", params)


@pytest.fixture
def verify(request: pytest.FixtureRequest, mlu_target: Target) -> Callable[..., Any]:
    """``verify(fn, *args, op=None, dtype="float32", quant="", tolerance=None, seed=None,
    reproducer="", **kwargs)``: run ``fn`` on this test's target and on the CPU, judge by the
    target mode's tolerance, record, and fail the test (or xfail it under a live waiver)."""
    session = request.config.stash[session_key]
    item = request.node
    calls = iter(range(1, 1 << 30))

    def run(fn: Callable, *args: Any, op: str | None = None, dtype: str = "float32", quant: str = "",
            tolerance: float | None = None, seed: int | None = None, reproducer: str = "",
            **kwargs: Any):
        __tracebackhide__ = True
        call = next(calls)
        case = Case(
            case_id=item.nodeid if call == 1 else f"{item.nodeid}#{call}",
            op=op or _marker_arg(item, "mlu_op") or _callable_name(fn),
            target=mlu_target, suite=_suite_of(item), dtype=dtype, quant=quant,
            shape=_shape_of(args), seed=seed, reproducer=reproducer or f"pytest '{item.nodeid}'",
        )
        waiver = _waiver_for(item, case.case_id, request.config.stash[settings_key])
        outcome = session.verify(fn, args, kwargs, case, tolerance=_tolerance_of(item, tolerance),
                                 waiver=waiver)
        return _judge_outcome(outcome, case)

    return run


def _judge_outcome(outcome, case: Case):
    __tracebackhide__ = True
    verdict = outcome.verdict
    if verdict.passed:
        return verdict
    what = f"{case.op} on {case.target} ({case.dtype}{', ' + case.quant if case.quant else ''})"
    if outcome.waived:
        pytest.xfail(f"waived until {outcome.waiver.until}: {outcome.waiver.reason} [{verdict.reason}]")
    if outcome.waiver is not None:
        pytest.fail(f"waiver expired on {outcome.waiver.until} ({outcome.waiver.reason}); "
                    f"{what}: {verdict.message}", pytrace=False)
    pytest.fail(f"{what}: {verdict.message}", pytrace=False)


def _marker_arg(item: pytest.Item, name: str) -> Any:
    marker = item.get_closest_marker(name)
    return marker.args[0] if marker and marker.args else None


def _tolerance_of(item: pytest.Item, explicit: float | None):
    if explicit is not None:
        return explicit
    marker = item.get_closest_marker("mlu_tolerance")
    if marker is None:
        return None
    from mluverify.compare import Tolerance

    bound = marker.args[0] if marker.args else marker.kwargs["bound"]
    return Tolerance(marker.kwargs.get("metric", "rel_mse"), bound, "marker")


def _waiver_for(item: pytest.Item, case_id: str, settings: Settings) -> Waiver | None:
    marker = item.get_closest_marker("mlu_waiver")
    if marker is not None:
        fields = dict(zip(("reason", "until"), marker.args), **marker.kwargs)
        return make_waiver(fields.get("reason"), fields.get("until"), where=f"mlu_waiver on {item.nodeid}")
    for pattern, waiver in settings.waivers.items():
        if matches_case_id(pattern, case_id):
            return waiver
    return None


def _callable_name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _suite_of(item: pytest.Item) -> str:
    parts = Path(item.nodeid.split("::")[0]).parts
    return parts[1] if len(parts) > 2 and parts[0] == "suites" else (parts[0] if parts else "")


def _shape_of(args: tuple) -> str:
    for arg in args:
        shape = getattr(arg, "shape", None)
        if shape is not None:
            return "x".join(map(str, shape)) or "scalar"
    return ""


def _line_writer(terminal: Any) -> Callable[[str], None]:
    if terminal is None:
        return print

    terminal.write_line("")  # off the progress line (xdist's reporter does not track it)
    return terminal.write_line


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    mlu_session = config.stash.get(session_key, None)
    if mlu_session is None:
        return
    mlu_session.close()
    if _is_worker(config):
        return
    from mluverify.report import finish_run

    settings = config.stash[settings_key]
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    status = finish_run(
        mlu_session.run_dir,
        pm=mlu_session.pm,
        baseline=Path(config.getoption("mlu_baseline")) if config.getoption("mlu_baseline") else None,
        gate=config.getoption("mlu_gate"),
        regress_factor=config.getoption("mlu_regress_factor") or settings.regress_factor,
        noise_floor=config.getoption("mlu_noise_floor") or settings.noise_floor,
        waivers=settings.waivers,
        terminal_write=_line_writer(terminal),
    )
    if status and session.exitstatus == 0:
        session.exitstatus = status
