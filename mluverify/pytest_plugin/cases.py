"""``--mlu-cases PATH``: captured cases (``mluverify capture``) replayed as pytest items.

A cases file (``cases.parquet`` in a cases directory) is collected like a test file wherever
pytest meets one (``pytest -p mluverify suites/captured``); ``--mlu-cases PATH`` adds PATH to
what is collected, or is all that is collected when no test path is given. Each unique case
becomes one item per target, named ``{case}[{target}]`` (``convolution-3[mlu:cnnl]``), that
runs the captured op through ``Pipeline.verify`` like any case: records (suite ``captured``,
``op`` the ATen overload without ``aten::``, ``aten_ops`` the overload), statuses,
tolerances and waivers work as for any test. A case whose inputs cannot be rebuilt errors
with the reason, recorded as ``errored``; the others run. Cases whose result is not a
function of their inputs (uninitialised memory, random values, factories) are skipped with
the reason.

On a fused target (``mlu:cnml``) only the ops its engine accepts are replayed (``FusedRule``,
the one rule of the shipped captured suites and of a user's cases): the fusible set, with
what the run's plugins add through ``mluverify_fusible_ops``, an in-place op by its
out-of-place form. The engine runs every other op layer by layer, as ``mlu:cnnl`` does, which
replays it; there it is skipped with that reason, never a ``not_fused`` failure.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from mluverify.core.case import Case, Target
from mluverify.errors import RecordsError, Unsupported

CASES_FILE = "cases.parquet"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mluverify", "mluverify: accelerator verification")
    group.addoption("--mlu-cases", action="append", default=[], metavar="PATH",
                    help="replay the captured cases of PATH (a `mluverify capture` directory or "
                         "its cases.parquet; repeatable); without test paths, only those run")


def pytest_configure(config: pytest.Config) -> None:
    paths = config.getoption("mlu_cases")
    if not paths:
        return
    for path in paths:
        if not Path(path).exists():
            raise pytest.UsageError(f"--mlu-cases {path}: no such cases directory or file")
    if config.args_source != pytest.Config.ArgsSource.ARGS:  # nothing named: only the cases
        config.args = list(paths)
    else:
        config.args = [*config.args, *(path for path in paths if path not in config.args)]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == CASES_FILE:
        return CapturedCasesFile.from_parent(parent, path=file_path)
    return None


def _captured_source(pipeline: Any) -> Any:
    """The ``captured`` case source of the run's plugins."""
    from mluverify.core.plugin_manager import call_hook

    sources = [s for answer in call_hook(pipeline.pm, "mluverify_case_sources") for s in answer]
    return next(source for source in sources if source.name == "captured")


def _out_of_place(op: str) -> str:
    """``aten::relu_`` -> ``aten::relu``; ``aten::div_.Scalar`` -> ``aten::div.Scalar``."""
    name, dot, overload = op.partition(".")
    return name.removesuffix("_") + dot + overload


class FusedRule:
    """Which captured cases a fused target replays: those whose op its engine fuses. The
    fusible set is read at the first fused item (the run has handed its plugins' ops to the
    device at configure)."""

    def __init__(self) -> None:
        self._fusible: frozenset[str] | None = None

    def skip_reason(self, op: str, target: Target) -> str | None:
        """Why the case of ``op`` is not replayed on ``target``; None: it is."""
        if (target.backend, target.mode) != ("mlu", "cnml"):
            return None
        if self._fusible is None:
            from mluverify.device.fusion.fusible import fusible_ops

            self._fusible = frozenset(name.removesuffix(".default") for name in fusible_ops())
        if _out_of_place(op) in self._fusible:
            return None
        return (f"{op} is outside {target}'s fusible set (mluverify_fusible_ops): the engine runs "
                f"it layer by layer, as mlu:cnnl does, which replays it")


class CapturedCasesFile(pytest.File):
    """A cases file: one item per unique case, target and device variant."""

    def collect(self) -> Iterator[pytest.Item]:
        from mluverify.pytest_plugin.plugin import _requested_targets, _target_params, pipeline_key, settings_key

        pipeline, settings = self.config.stash[pipeline_key], self.config.stash[settings_key]
        variants = [param for text in _requested_targets(self.config, settings)
                    for param in _target_params(pipeline, text, settings.core_versions)]
        fused = FusedRule()
        for case in _captured_source(pipeline).with_paths([self.path]).cases():
            for variant in variants:
                target, core_version = variant.values
                item = CapturedCaseItem.from_parent(self, name=f"{case.name}[{variant.id}]", case=case,
                                                    target=target, core_version=core_version)
                for mark in variant.marks:  # the target unavailable here: skipped with why
                    item.add_marker(mark)
                why = case.not_comparable or fused.skip_reason(case.op, target)
                if why:
                    item.add_marker(pytest.mark.skip(reason=why))
                yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        if isinstance(excinfo.value, RecordsError):  # a bad cases file: the message says it all
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class CapturedCaseItem(pytest.Item):
    """One captured case on one target (and device variant)."""

    # What the run directory's claim looks for in an item that verifies (mluverify.pytest_plugin.run).
    fixturenames = ("mlu_target",)

    def __init__(self, *, case: Any, target: Target, core_version: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.mlu_target = target
        self.core_version = core_version
        self.replay: Any = None

    def _case(self, dtype: str = "float32", shape: str = "") -> Case:
        from mluverify.pytest_plugin.plugin import settings_key
        from mluverify.pytest_plugin.run import report_dir
        from mluverify.pytest_plugin.reproducer import reproducer_command

        reproducer = reproducer_command(self.config, self.nodeid, self.mlu_target, self.core_version,
                                        report_dir(self.config, self.config.stash[settings_key]))
        return Case(case_id=self.nodeid, op=self.case.op_name, target=self.mlu_target, suite="captured",
                    dtype=dtype, shape=shape, reproducer=reproducer, core_version=self.core_version,
                    aten_ops=(self.case.op,))

    def setup(self) -> None:
        """Rebuild the inputs; a case that cannot be rebuilt is an errored record."""
        from mluverify.pytest_plugin.plugin import pipeline_key

        try:
            self.replay = self.case.build()
        except RecordsError as exc:
            why = f"inputs cannot be rebuilt: {exc}"
            self.config.stash[pipeline_key].write_errored(self._case(), why)
            pytest.fail(f"{self.case.name}: {why}", pytrace=False)

    def runtest(self) -> None:
        from mluverify.pytest_plugin.plugin import _test_outcome, _waiver_for, pipeline_key, settings_key

        __tracebackhide__ = True
        captured = self.case
        self.add_report_section("call", "op", f"{captured.op}({captured.arguments}), run "
                                f"{captured.count}x by {captured.model}, first at {captured.call_site}")
        replay, settings = self.replay, self.config.stash[settings_key]
        shape = next(("x".join(map(str, t.shape)) or "scalar" for t in replay.args), "")
        case = self._case(replay.dtype, shape)
        try:
            outcome = self.config.stash[pipeline_key].verify(
                replay.fn, replay.args, {}, case, waiver=_waiver_for(self, case, settings))
        except Unsupported as exc:  # e.g. a bfloat16 op on a target that does not compute in it
            pytest.skip(str(exc))
        _test_outcome(outcome, case, settings)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.case.model} {self.name}"
