"""What ``pytest -p mluverify`` adds: the ``--mlu-*`` options, markers and the ``verify`` fixture.

Thin by design: judging and recording live in ``mluverify.core.pipeline``, reports and gating in
``mluverify.report``. State is kept under StashKeys on the pytest config. Each pytest config
gets its own mluverify plugin manager (``plugin_manager(config)``), configured in
``pytest_configure`` and unconfigured in ``pytest_unconfigure``; modules that implement
``mluverify_*`` hooks and are registered with pytest (``-p module``, conftest.py) are
forwarded to it.
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pytest

from mluverify.core.calibration import calibrating_on
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings, load_settings
from mluverify.core.expectations import Waiver, Where, make_waiver, waiver_for
from mluverify.errors import MluverifyError, Unsupported
from mluverify.pytest_plugin.run import PytestRun, is_worker, report_dir
from mluverify.pytest_plugin.reproducer import RunReproducers, add_options as add_reproducer_options, run_reproducers
from mluverify.core.pipeline import Checks, Pipeline
from mluverify.core.status import PASSED

if TYPE_CHECKING:
    import pluggy

    from mluverify.core.task import Task

pipeline_key = pytest.StashKey[Pipeline]()
settings_key = pytest.StashKey[Settings]()
plugin_manager_key = pytest.StashKey["pluggy.PluginManager"]()
reproducers_key = pytest.StashKey[RunReproducers]()
pytest_plugins = ["mluverify.pytest_plugin.cases",  # --mlu-cases: captured cases as items
                  "mluverify.pytest_plugin.seed_tests"]  # seed-style unittest scripts (mluverify.testing)
# The [tool.mluverify] keys the --mlu-* options override: key -> the option's dest.
OPTION_KEYS = {"core_versions": "mlu_core_version", "determinism_share": "mlu_determinism_share",
               "regress_factor": "mlu_regress_factor", "noise_floor": "mlu_noise_floor"}

MARKERS = (
    "mlu_op(name): the op a case verifies (default: the verified callable's name)",
    "mlu_tolerance(bound, metric='rel_mse'): this test's tolerance; overrides hook, config and policy",
    "mlu_waiver(reason, until, max=None, category='', link='', scope=None, max_by_kind=None): a known deviation; "
    "failures are recorded as waived until the date YYYY-MM-DD (a judged value above max, or above "
    "max_by_kind[its record kind], is not excused: it fails, 'waived but worsened')",
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
    group.addoption("--mlu-allow-incomplete", action="store_true",
                    help="let a run that did not finish (interrupted, -x) pass the gate and exit 0 "
                         "(it is still reported as incomplete)")
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
    _quiet_torch_trace(config)
    try:
        settings = _with_options(load_settings(config.rootpath / "pyproject.toml"), config)
        pipeline = _new_pipeline(config, settings)
        _check_targets(config, pipeline, settings)
    except MluverifyError as exc:
        raise pytest.UsageError(f"mluverify: {exc}") from None
    config.stash[settings_key] = settings
    config.stash[pipeline_key] = pipeline
    config.stash[plugin_manager_key] = pipeline.pm
    config.pluginmanager.register(_PluginForwarder(pipeline), "mluverify-forwarder")
    _register_run(config, pipeline, settings)
    _configure_plugins(pipeline.pm)


def _quiet_torch_trace(config: pytest.Config) -> None:
    """pytest attaches its log capture to every logger that does not propagate, torch's
    structured-trace logger ``torch.__trace`` included (always DEBUG, meant for ``TORCH_TRACE``
    files): a failing test's captured log then holds an empty ``DEBUG torch.__trace`` line per
    compile step. Disabled for the session unless ``TORCH_TRACE`` asks for the trace."""
    if os.environ.get("TORCH_TRACE"):
        return
    trace = logging.getLogger("torch.__trace")
    was_disabled = trace.disabled
    trace.disabled = True
    config.add_cleanup(lambda: setattr(trace, "disabled", was_disabled))


def _configure_plugins(pm: "pluggy.PluginManager") -> None:
    from mluverify.core.plugin_manager import configure, unconfigure

    try:
        configure(pm)
    except MluverifyError as exc:
        unconfigure(pm)  # undo what the plugins before the failing one set up
        raise pytest.UsageError(f"mluverify: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    """End this config's run: unconfigure its plugin manager (the device forgets its plugins)
    and drop it, so a later run in this process starts from a fresh one."""
    from mluverify.core.plugin_manager import unconfigure

    pm = config.stash.get(plugin_manager_key, None)
    if pm is not None:
        del config.stash[plugin_manager_key]
        unconfigure(pm)


def plugin_manager(config: pytest.Config) -> "pluggy.PluginManager":
    """The mluverify plugin manager of this pytest run (``config``): for suites and conftest.py
    files that call hooks, e.g. ``plugin_manager(config).hook.mluverify_case_sources()``."""
    try:
        return config.stash[plugin_manager_key]
    except KeyError:
        raise MluverifyError("mluverify is not configured in this pytest run "
                             "(its plugin is disabled, or the run has ended)") from None


def _check_targets(config: pytest.Config, pipeline: Pipeline, settings: Settings) -> None:
    """Every requested target must be known at start-up, unless a conftest.py that pytest has
    not loaded yet (below the test paths) may add its back end: then the tests collected next
    to it resolve it, and the others say it is unknown (``_target_params``)."""
    for target in _requested_targets(config, settings):
        try:
            _, backend = pipeline.resolve(target)
        except MluverifyError:
            if not _conftests_to_come(config):
                raise
            continue
        try:
            backend.variants_for(settings.core_versions)
        except MluverifyError as exc:
            raise MluverifyError(f"{_core_versions_source(config)}: {exc}") from None


def _core_versions_source(config: pytest.Config) -> str:
    """Where this run's core versions come from: the option, else the project's file."""
    if config.getoption(OPTION_KEYS["core_versions"]) is not None:
        return "command line option --mlu-core-version"
    return f"{config.rootpath / 'pyproject.toml'}: [tool.mluverify] core_versions"


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


def _register_run(config: pytest.Config, pipeline: Pipeline, settings: Settings) -> None:
    """The run's report directory and reproducers (``mluverify.pytest_plugin.run``), in pytest and in
    mluverify's plugin manager (it observes records)."""
    from mluverify.core.plugin_manager import register
    from mluverify.report.rundir import RunDirectory

    run = PytestRun(config, pipeline, RunDirectory(report_dir(config, settings)),
                    targets=_requested_targets(config, settings))
    config.pluginmanager.register(run, "mluverify-run")
    register(pipeline.pm, run)


def _with_options(settings: Settings, config: pytest.Config) -> Settings:
    """``settings`` with the ``--mlu-*`` options that override ``[tool.mluverify]`` keys applied
    (validated by the same rules; an error names the option)."""
    from mluverify.core.config import parse_settings

    checked = {}
    for key, dest in OPTION_KEYS.items():
        value = config.getoption(dest)
        if value is not None:
            source = f"command line option --{dest.replace('_', '-')}"
            checked[key] = getattr(parse_settings({key: value}, source=source), key)
    return replace(settings, **checked) if checked else settings


def _new_pipeline(config: pytest.Config, settings: Settings) -> Pipeline:
    from mluverify.core.plugin_manager import new_plugin_manager
    from mluverify.report.records import ShardWriter
    from mluverify.report.rundir import RunDirectory

    # This run's own manager: the -p plugins and conftest.py files pytest loaded so far.
    pm = new_plugin_manager(extra=_mluverify_plugins(config.pluginmanager.get_plugins()))
    dump_case = _dump_case if config.getoption("mlu_dump") == "fail" else None
    if is_worker(config):
        return Pipeline(pm, settings, Path(config.workerinput["mluverify_run_dir"]), ShardWriter,
                        run_id=config.workerinput["mluverify_run_id"], worker=config.workerinput["workerid"],
                        dump_case=dump_case)
    # Records go to the staging directory, claimed before the first test (mluverify.pytest_plugin.run).
    return Pipeline(pm, settings, RunDirectory(report_dir(config, settings)).staging, ShardWriter,
                    dump_case=dump_case)


def _dump_case(fn: Callable, args: tuple, kwargs: dict, outdir: Path) -> Path:
    """``--mlu-dump=fail``: a failing case dumped by the Dumper (level 1, CPU re-run of each op)."""
    from mluverify.dump import dump_case

    return dump_case(fn, args, kwargs, outdir)


def _mluverify_plugins(plugins) -> list[Any]:
    import mluverify

    return [p for p in plugins if p is not mluverify and any(n.startswith("mluverify_") for n in dir(p))]


class _PluginForwarder:
    """Forwards plugins registered with pytest after start-up (conftest.py files) that
    implement mluverify hooks to mluverify's plugin manager."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def pytest_plugin_registered(self, plugin: Any) -> None:
        from mluverify.core.plugin_manager import register

        if _mluverify_plugins([plugin]):
            try:
                register(self.pipeline.pm, plugin)
            except MluverifyError as exc:  # a conftest.py found while collecting: its error, alone
                raise pytest.Collector.CollectError(f"mluverify: {exc}") from None


def _requested_targets(config: pytest.Config, settings: Settings) -> list[str]:
    return config.getoption("mlu_target") or list(settings.targets)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mlu_target" not in metafunc.fixturenames:
        return
    params = variant_params(metafunc.config, metafunc.definition)
    if "mlu_core_version" in metafunc.fixturenames:
        metafunc.parametrize(("mlu_target", "mlu_core_version"), params)
    else:
        metafunc.parametrize("mlu_target", [pytest.param(p.values[0], id=p.id, marks=p.marks) for p in params])


def variant_params(config: pytest.Config, node: pytest.Item) -> list:
    """One param ``(target, core version)`` per requested target that ``node``'s ``mlu_targets``
    marker admits and per device variant; a skipped ``no-target`` param when none is left."""
    pipeline, settings = config.stash[pipeline_key], config.stash[settings_key]
    marker = node.get_closest_marker("mlu_targets")
    requested = _requested_targets(config, settings)
    if marker is not None:
        requested = [t for t in requested if t in marker.args]
    params = [param for text in requested for param in _target_params(pipeline, text, settings.core_versions)]
    if not params:
        params = [pytest.param(None, "", id="no-target",
                               marks=pytest.mark.skip(reason=f"none of the requested targets {requested} "
                                                             f"is in mlu_targets{marker.args}"))]
    return params


def _target_params(pipeline: Pipeline, text: str, core_versions: tuple[str, ...]) -> list:
    """One param ``(target, core version)`` per device variant the target runs on: its back
    end's variants among ``core_versions``, or ``""`` for a back end without variants."""
    try:
        target, backend = pipeline.resolve(text)
        variants = backend.variants_for(core_versions)
    except MluverifyError as exc:  # no conftest.py collected so far added it (_check_targets)
        raise pytest.Collector.CollectError(f"mluverify: {exc}") from None
    reason = backend.unavailable_reason() or backend.mode_unavailable_reason(target.mode)
    marks = [pytest.mark.skip(reason=f"target {target} unavailable: {reason}")] if reason else []
    if not variants:
        return [pytest.param(target, "", id=str(target), marks=marks)]
    return [pytest.param(target, v, id=f"{target}-{v}", marks=marks) for v in variants]


@pytest.fixture
def mlu_core_version() -> str:
    """The device variant (the MLU's core version) a case runs on; ``""`` for back ends without
    variants. Parametrized together with ``mlu_target``."""
    return ""


@pytest.fixture
def mlu_run_dir(request: pytest.FixtureRequest) -> Path:
    """The directory of the run being built (``<report dir>.running``, swapped in as the report
    directory when the run ends): where a suite writes files that belong to the run, beside its
    records. Claimed once the run collected a test that uses ``verify``."""
    return request.config.stash[pipeline_key].run_dir


@pytest.fixture
def verify(request: pytest.FixtureRequest, mlu_target: Target, mlu_core_version: str) -> Callable[..., Any]:
    """``verify(fn, *args, op=None, dtype="float32", quant="", calibration=None, tolerance=None,
    seed=None, reproducer="", aten_ops=(), golden=None, expect_non_finite=False, grad=False,
    optimizer=None, task=None, **kwargs)``: run ``fn`` on this test's target and on the CPU, judge,
    record, and fail the test unless the case passed. ``help(verify)`` in a test describes every
    argument."""
    pipeline = request.config.stash[pipeline_key]
    settings = request.config.stash[settings_key]
    reproducers = _run_reproducers(request.config, settings)
    item = request.node
    calls = iter(range(1, 1 << 30))

    def run(fn: Callable, *args: Any, op: str | None = None, dtype: str = "float32", quant: str = "",
            calibration: Sequence[Any] | None = None, tolerance: float | None = None, seed: int | None = None,
            reproducer: str = "", aten_ops: tuple[str, ...] = (), golden: bool | None = None,
            expect_non_finite: bool = False,
            grad: bool = False, optimizer: Callable | None = None, task: Task | None = None, **kwargs: Any):
        """Run ``fn(*args, **kwargs)`` on this test's target and on the CPU, judge the device's
        output by the tolerance, write one record per comparison, and return the verdict
        (``mluverify.Verdict``); the test fails unless the case passed (xfails under a live
        waiver; ``[tool.mluverify] allow`` / ``skip`` decide for the provenance statuses). A second
        call in one test is case ``<node id>#2``, and so on.

        ``fn``: a callable or a ``torch.nn.Module`` (copied to the device); ``args`` /
        ``kwargs``: its inputs, moved to the device (``kwargs``: every keyword not below).
        ``op``: the op's name in the record and in ``[tool.mluverify.tolerances]`` keys
        (default: the ``mlu_op`` marker, else ``fn``'s name). ``dtype``: the device's precision
        (``"float16"``, ``"bfloat16"``, ...): floating inputs are cast to it on the target, the
        CPU reference stays float32, and the tolerance is looked up for it. ``quant``:
        ``"int8"`` / ``"int16"`` quantizes the module (calibrated on ``args``) on the fused MLU
        targets (``mlu:cnml``, ``mlu:offline``); recorded in the ``quant`` column (``""``:
        none); a target that would quantize nothing skips the case with the reason (a module
        ``quantize_dynamic_mlu`` quantized runs quantized on every ``mlu`` mode). ``calibration``: the batches a
        quantization calibrates on instead of ``args`` (each a tensor or a tuple of positional
        arguments), taken by ``ort:int8`` and ``openvino:int8``; a target that calibrates
        otherwise skips the case. ``tolerance``: a bound on the mode policy's metric (a number) or a
        ``mluverify.Tolerance``; overrides the ``mlu_tolerance`` marker, the hooks and the
        table (``mluverify.judge.resolve_tolerance``). ``seed``: the seed the test drew its
        inputs with, recorded (the ``seed`` column, shown in the case's detail); with ``grad`` it
        also seeds the upstream gradient (default 0). ``reproducer``: the command that
        re-runs the case (default: the pytest command of this test on this target).
        ``aten_ops``: the ATen ops of the op under test (default inferred from ``op``).
        ``golden``: judge against a float64 CPU result too (default: the ``mlu_golden``
        marker or ``--mlu-golden``). ``expect_non_finite``: an output NaN / inf everywhere on
        both sides is what the case expects (else "nothing compared" fails it). ``grad``: run
        backward too and judge every gradient; ``optimizer``: a factory ``params -> Optimizer``
        whose one step is judged as well (``mluverify.core.gradients``). ``task``: a task metric
        (``mluverify.core.task.Task``, e.g. accuracy on a data set) scored on the output: below
        the threshold its error budget and sample size give, the case fails."""
        __tracebackhide__ = True
        call = next(calls)
        case = Case(
            case_id=item.nodeid if call == 1 else f"{item.nodeid}#{call}",
            op=op or _marker_arg(item, "mlu_op") or _callable_name(fn),
            target=mlu_target, suite=_suite_of(item), dtype=dtype, quant=quant,
            shape=_shape_of(args), seed=seed,
            reproducer=reproducer or reproducers.command(item.nodeid, mlu_target, mlu_core_version),
            core_version=mlu_core_version, aten_ops=tuple(aten_ops),
        )
        waiver = _waiver_for(item, case, settings)
        checks = Checks(golden=_golden_on(request.config, item) if golden is None else golden,
                        expect_non_finite=expect_non_finite)
        try:
            with calibrating_on(calibration, case, pipeline.resolve(case.target)[1]):
                outcome = pipeline.verify(fn, args, kwargs, case, tolerance=_tolerance_of(item, tolerance),
                                          waiver=waiver, checks=checks, grad=grad, optimizer=optimizer, task=task)
        except Unsupported as exc:  # what the target does not do is not a result: a skip, unrecorded
            pytest.skip(str(exc))
        except MluverifyError as exc:
            # The tool's own error (recorded as errored) says what went wrong: shown at the
            # user's call, without the frames through the tool's internals.
            raise exc.with_traceback(None) from None
        return _test_outcome(outcome, case, settings)

    return run


def _run_reproducers(config: pytest.Config, settings: Settings) -> RunReproducers:
    """What the run's reproducers share, made once per run at its first verifying test."""
    if reproducers_key not in config.stash:
        config.stash[reproducers_key] = run_reproducers(config, report_dir(config, settings))
    return config.stash[reproducers_key]


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
        pytest.xfail(f"waived until {outcome.waiver.until}: {outcome.waiver.reason} [{outcome.record.reason}]")
    if outcome.status in settings.skip:
        pytest.skip(f"{outcome.status}: {what}: {outcome.why}")
    if outcome.waiver is not None and outcome.waiver.expired():
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


def _waiver_for(item: pytest.Item, case: Case, settings: Settings) -> Waiver | None:
    """The marker's waiver, else the first configured one, that covers ``case`` where it runs."""
    import torch

    where = Where(str(case.target), case.core_version or None, None, torch.__version__)
    marker = item.get_closest_marker("mlu_waiver")
    if marker is not None:
        fields = dict(zip(("reason", "until", "max"), marker.args), **marker.kwargs)
        waiver = make_waiver(fields.pop("reason", None), fields.pop("until", None), fields.pop("max", None),
                             where=f"mlu_waiver on {item.nodeid}", **fields)
        return waiver_for(case.case_id, {"*": waiver}, where)
    return waiver_for(case.case_id, settings.waivers, where)


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
