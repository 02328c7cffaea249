"""What ``pytest -p mluverify`` adds: the ``--mlu-*`` options, markers and the ``verify`` fixture.

Thin by design: judging and recording live in ``mluverify.core.pipeline``, reports and gating in
``mluverify.report``. State is kept under StashKeys on the pytest config. Modules that
implement ``mluverify_*`` hooks and are registered with pytest (``-p module``, conftest.py)
are forwarded to mluverify's own plugin manager.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from mluverify.core.case import Case, Target
from mluverify.core.config import Settings, Waiver, load_settings, make_waiver, matches_case_id
from mluverify.errors import MluverifyError
from mluverify.pytest_plugin.run import PytestRun, is_worker, report_dir
from mluverify.pytest_plugin.reproducer import add_options as add_reproducer_options, reproducer_command
from mluverify.core.pipeline import Checks, Session
from mluverify.core.status import PASSED

session_key = pytest.StashKey[Session]()
settings_key = pytest.StashKey[Settings]()
pytest_plugins = ["mluverify.pytest_plugin.cases"]  # --mlu-cases: captured cases as items

MARKERS = (
    "mlu_op(name): the op a case verifies (default: the verified callable's name)",
    "mlu_tolerance(bound, metric='rel_mse'): this test's tolerance; overrides hook, config and policy",
    "mlu_waiver(reason, until, max=None): a known deviation; failures are recorded as waived until the "
    "date YYYY-MM-DD (a judged value above max fails the gate)",
    "mlu_targets(*targets): run this test only on these targets ('backend:mode')",
    "mlu_golden(enabled=True): judge this test's cases against a float64 CPU result as well "
    "(records device_error and reference_error; needed by the golden policy)",
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
                    help="a judged metric growing more than X times its baseline fails the gate "
                         "(default: [tool.mluverify] regress_factor)")
    group.addoption("--mlu-noise-floor", type=float, default=None, metavar="V",
                    help="metric values below V are noise for the regression rule "
                         "(default: [tool.mluverify] noise_floor)")
    group.addoption("--mlu-dump", choices=("off", "fail"), default="off",
                    help="'fail': dump every failing case (level 1, CPU re-run) into the report dir")
    group.addoption("--mlu-golden", nargs="?", const="all", default="marked", choices=("all", "marked", "off"),
                    help="float64 golden reference: 'all' cases (the default of a bare --mlu-golden), only "
                         "those 'marked' mlu_golden (default), or 'off'")
    group.addoption("--mlu-core-version", action="append", default=None, metavar="VERSION",
                    help="device variant to run each target on (repeatable; the MLU's core versions "
                         "MLU270, MLU370); default: [tool.mluverify] core_versions")
    group.addoption("--mlu-determinism-share", type=float, default=None, metavar="SHARE",
                    help="share of cases (0 to 1) run twice on the device to check determinism "
                         "(default: [tool.mluverify] determinism_share)")
    add_reproducer_options(group)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:
        settings = _with_options(load_settings(config.rootpath / "pyproject.toml"), config)
        session = _new_session(config, settings)
        _check_targets(config, session, settings)
    except MluverifyError as exc:
        raise pytest.UsageError(f"mluverify: {exc}") from None
    config.stash[settings_key] = settings
    config.stash[session_key] = session
    config.pluginmanager.register(_PluginForwarder(session), "mluverify-forwarder")
    _register_run(config, session, settings)


def _check_targets(config: pytest.Config, session: Session, settings: Settings) -> None:
    """Every requested target must be known at start-up, unless a conftest.py that pytest has
    not loaded yet (below the test paths) may add its back end: then the tests collected next
    to it resolve it, and the others say it is unknown (``_target_params``)."""
    for target in _requested_targets(config, settings):
        try:
            session.resolve(target)
        except MluverifyError:
            if not _conftests_to_come(config):
                raise


def _conftests_to_come(config: pytest.Config) -> bool:
    """Whether a conftest.py that pytest has not loaded lies below the test paths (in the
    directories pytest recurses into)."""
    import fnmatch
    import os

    loaded = {getattr(plugin, "__file__", None) for plugin in config.pluginmanager.get_plugins()}
    skipped = config.getini("norecursedirs")
    for arg in config.args:
        for directory, subdirs, files in os.walk(config.invocation_params.dir / arg.split("::", 1)[0]):
            subdirs[:] = [d for d in subdirs if not any(fnmatch.fnmatch(d, pattern) for pattern in skipped)]
            if "conftest.py" in files and os.path.join(directory, "conftest.py") not in loaded:
                return True
    return False


def _register_run(config: pytest.Config, session: Session, settings: Settings) -> None:
    """The run's report directory and reproducers (``mluverify.pytest_plugin.run``), in pytest and in
    mluverify's plugin manager (it observes records)."""
    from mluverify.core.plugin_manager import register
    from mluverify.report.rundir import RunDirectory

    run = PytestRun(config, session, RunDirectory(report_dir(config, settings)),
                    targets=_requested_targets(config, settings))
    config.pluginmanager.register(run, "mluverify-run")
    register(session.pm, run)


def _with_options(settings: Settings, config: pytest.Config) -> Settings:
    """``settings`` with the ``--mlu-*`` options that override ``[tool.mluverify]`` keys applied
    (validated by the same rules)."""
    from mluverify.core.config import parse_settings

    overrides = {"core_versions": config.getoption("mlu_core_version"),
                 "determinism_share": config.getoption("mlu_determinism_share"),
                 "regress_factor": config.getoption("mlu_regress_factor"),
                 "noise_floor": config.getoption("mlu_noise_floor")}
    given = {key: value for key, value in overrides.items() if value is not None}
    if not given:
        return settings
    checked = parse_settings(given, source="command line")
    return replace(settings, **{key: getattr(checked, key) for key in given})


def _new_session(config: pytest.Config, settings: Settings) -> Session:
    from mluverify.core.plugin_manager import get_plugin_manager, register
    from mluverify.report.rundir import RunDirectory

    # The process-wide manager: the emulated device takes its kernels from it too.
    pm = get_plugin_manager()
    for plugin in _mluverify_plugins(config.pluginmanager.get_plugins()):
        register(pm, plugin)
    dump_failures = config.getoption("mlu_dump") == "fail"
    if is_worker(config):
        return Session(pm, settings, Path(config.workerinput["mluverify_run_dir"]),
                       run_id=config.workerinput["mluverify_run_id"], worker=config.workerinput["workerid"],
                       dump_failures=dump_failures)
    # Records go to the staging directory, claimed before the first test (mluverify.pytest_plugin.run).
    return Session(pm, settings, RunDirectory(report_dir(config, settings)).staging, dump_failures=dump_failures)


def _mluverify_plugins(plugins) -> list[Any]:
    import mluverify

    return [p for p in plugins if p is not mluverify and any(n.startswith("mluverify_") for n in dir(p))]


class _PluginForwarder:
    """Forwards plugins registered with pytest after start-up (conftest.py files) that
    implement mluverify hooks to mluverify's plugin manager."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pytest_plugin_registered(self, plugin: Any) -> None:
        from mluverify.core.plugin_manager import register

        if _mluverify_plugins([plugin]):
            try:
                register(self.session.pm, plugin)
            except MluverifyError as exc:  # a conftest.py found while collecting: its error, alone
                raise pytest.Collector.CollectError(f"mluverify: {exc}") from None


def _requested_targets(config: pytest.Config, settings: Settings) -> list[str]:
    return config.getoption("mlu_target") or list(settings.targets)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mlu_target" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash[session_key]
    settings = metafunc.config.stash[settings_key]
    marker = metafunc.definition.get_closest_marker("mlu_targets")
    requested = _requested_targets(metafunc.config, settings)
    if marker is not None:
        requested = [t for t in requested if t in marker.args]
    params = [param for text in requested for param in _target_params(session, text, settings.core_versions)]
    if not params:
        params = [pytest.param(None, "", id="no-target",
                               marks=pytest.mark.skip(reason=f"none of the requested targets {requested} "
                                                             f"is in mlu_targets{marker.args}"))]
    if "mlu_core_version" in metafunc.fixturenames:
        metafunc.parametrize(("mlu_target", "mlu_core_version"), params)
    else:
        metafunc.parametrize("mlu_target", [pytest.param(p.values[0], id=p.id, marks=p.marks) for p in params])


def _target_params(session: Session, text: str, core_versions: tuple[str, ...]) -> list:
    """One param ``(target, core version)`` per device variant the target runs on: its back
    end's variants among ``core_versions``, or ``""`` for a back end without variants."""
    try:
        target, backend = session.resolve(text)
    except MluverifyError as exc:  # no conftest.py collected so far added it (_check_targets)
        raise pytest.Collector.CollectError(f"mluverify: {exc}") from None
    reason = backend.unavailable_reason() or backend.mode_unavailable_reason(target.mode)
    marks = [pytest.mark.skip(reason=f"target {target} unavailable: {reason}")] if reason else []
    variants = backend.variants_for(core_versions)
    if not variants:
        return [pytest.param(target, "", id=str(target), marks=marks)]
    return [pytest.param(target, v, id=f"{target}-{v}", marks=marks) for v in variants]


@pytest.fixture
def mlu_core_version() -> str:
    """The device variant (the MLU's core version) a case runs on; ``""`` for back ends without
    variants. Parametrized together with ``mlu_target``."""
    return ""


@pytest.fixture
def verify(request: pytest.FixtureRequest, mlu_target: Target, mlu_core_version: str) -> Callable[..., Any]:
    """``verify(fn, *args, op=None, dtype="float32", quant="", tolerance=None, seed=None,
    reproducer="", aten_ops=(), golden=None, expect_non_finite=False, grad=False, optimizer=None,
    **kwargs)``: run ``fn`` on this test's target and on the CPU, judge by the target mode's
    tolerance, record, and fail the test unless the case passed (xfail under a live waiver;
    ``[tool.mluverify] allow`` / ``skip`` decide for the provenance statuses). ``aten_ops``: the
    ATen ops of the op under test (default inferred from ``op``); ``golden``: judge against
    float64 too (default: the ``mlu_golden`` marker or ``--mlu-golden``); ``grad``: run backward
    too and judge every gradient (``optimizer``: a factory ``params -> Optimizer`` whose one step
    is judged as well; ``mluverify.core.gradients``)."""
    session = request.config.stash[session_key]
    settings = request.config.stash[settings_key]
    item = request.node
    calls = iter(range(1, 1 << 30))

    def run(fn: Callable, *args: Any, op: str | None = None, dtype: str = "float32", quant: str = "",
            tolerance: float | None = None, seed: int | None = None, reproducer: str = "",
            aten_ops: tuple[str, ...] = (), golden: bool | None = None, expect_non_finite: bool = False,
            grad: bool = False, optimizer: Callable | None = None, **kwargs: Any):
        __tracebackhide__ = True
        call = next(calls)
        case = Case(
            case_id=item.nodeid if call == 1 else f"{item.nodeid}#{call}",
            op=op or _marker_arg(item, "mlu_op") or _callable_name(fn),
            target=mlu_target, suite=_suite_of(item), dtype=dtype, quant=quant,
            shape=_shape_of(args), seed=seed,
            reproducer=reproducer or reproducer_command(request.config, item.nodeid, mlu_target,
                                                        mlu_core_version, report_dir(request.config, settings)),
            core_version=mlu_core_version, aten_ops=tuple(aten_ops),
        )
        waiver = _waiver_for(item, case.case_id, settings)
        checks = Checks(golden=_golden_on(request.config, item) if golden is None else golden,
                        expect_non_finite=expect_non_finite)
        outcome = session.verify(fn, args, kwargs, case, tolerance=_tolerance_of(item, tolerance),
                                 waiver=waiver, checks=checks, grad=grad, optimizer=optimizer)
        return _test_outcome(outcome, case, settings)

    return run


def _golden_on(config: pytest.Config, item: pytest.Item) -> bool:
    """``--mlu-golden=all|off`` decides for every case; ``marked`` (the default) follows the
    ``mlu_golden`` marker."""
    choice = config.getoption("mlu_golden")
    if choice != "marked":
        return choice == "all"
    marker = item.get_closest_marker("mlu_golden")
    return marker is not None and bool(marker.args[0] if marker.args else marker.kwargs.get("enabled", True))


def _test_outcome(outcome, case: Case, settings: Settings):
    """A case's status as the test's outcome: return the verdict, or skip / xfail / fail with
    the reason."""
    __tracebackhide__ = True
    verdict = outcome.verdict
    if outcome.status == PASSED or outcome.status in settings.allow:
        return verdict
    variant = f"/{case.core_version}" if case.core_version else ""
    what = f"{case.op} on {case.target}{variant} ({case.dtype}{', ' + case.quant if case.quant else ''})"
    if outcome.waived:
        pytest.xfail(f"waived until {outcome.waiver.until}: {outcome.waiver.reason} [{outcome.why}]")
    if outcome.status in settings.skip:
        pytest.skip(f"{outcome.status}: {what}: {outcome.why}")
    if outcome.waiver is not None:
        pytest.fail(f"waiver expired on {outcome.waiver.until} ({outcome.waiver.reason}); "
                    f"{what}: {verdict.message}", pytrace=False)
    if verdict.passed:  # the value is right, the device did not compute it as claimed
        pytest.fail(f"{what}: {outcome.status}: {outcome.why}\n(value within bound: {verdict.reason})",
                    pytrace=False)
    headline = f"{outcome.status}: {outcome.why}\n" if outcome.why else ""
    pytest.fail(f"{what}: {headline}{verdict.message}", pytrace=False)


def _marker_arg(item: pytest.Item, name: str) -> Any:
    marker = item.get_closest_marker(name)
    return marker.args[0] if marker and marker.args else None


def _tolerance_of(item: pytest.Item, explicit: float | None):
    if explicit is not None:
        return explicit
    marker = item.get_closest_marker("mlu_tolerance")
    if marker is None:
        return None
    from mluverify.judge import Tolerance

    bound = marker.args[0] if marker.args else marker.kwargs["bound"]
    return Tolerance(marker.kwargs.get("metric", "rel_mse"), bound, "marker")


def _waiver_for(item: pytest.Item, case_id: str, settings: Settings) -> Waiver | None:
    marker = item.get_closest_marker("mlu_waiver")
    if marker is not None:
        fields = dict(zip(("reason", "until", "max"), marker.args), **marker.kwargs)
        return make_waiver(fields.get("reason"), fields.get("until"), fields.get("max"),
                           where=f"mlu_waiver on {item.nodeid}")
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
