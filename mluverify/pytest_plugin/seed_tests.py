"""Seed-style unittest scripts (``mluverify.testing.TestCase``) under ``pytest -p mluverify``.

pytest cannot parametrize ``unittest`` methods, so a ``TestCase`` subclass is collected here
instead of by pytest's unittest plugin: one item per test method, target and device variant,
named like a ``verify`` test's (``TestAdd::test_add[mlu:cnnl-MLU270]``), each run with the
run's pipeline handed to the TestCase (``mluverify.testing.seed_run``). Records, reproducers,
waivers, ``[tool.mluverify] allow`` / ``skip`` and the pytest outcome work as for ``verify``;
``@unittest.skip`` skips as in any unittest run; an ``mlu_targets`` marker on the class or the
module (``pytestmark``) keeps the targets it names, as for any test. A target the scripts cannot
run on (not ``mlu:cnnl`` / ``mlu:cnml``) is a skip naming why.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any, Iterator

import pytest
from _pytest.unittest import TestCaseFunction, UnitTestCase

from mluverify.core.case import Case, Target


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> pytest.Collector | None:
    testing = sys.modules.get("mluverify.testing")  # not imported: the module holds no seed script
    if (testing is None or not isinstance(obj, type) or not issubclass(obj, testing.TestCase)
            or obj is testing.TestCase or inspect.isabstract(obj)):
        return None
    return SeedTestCaseClass.from_parent(collector, name=name, obj=obj)


class SeedTestCaseClass(UnitTestCase):
    """A ``TestCase`` subclass: pytest's unittest collection, each method once per variant."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from mluverify.pytest_plugin.plugin import variant_params
        from mluverify.testing import unsupported

        methods = list(super().collect())  # first: it loads the class's own markers with the class
        variants = variant_params(self.config, self)  # the class's or module's mlu_targets marker applies
        for method in methods:
            if not isinstance(method, TestCaseFunction):
                yield method
                continue
            for variant in variants:
                target, core_version = variant.values
                item = SeedTestItem.from_parent(self, name=f"{method.name}[{variant.id}]", originalname=method.name,
                                                target=target, core_version=core_version, variant=variant.id)
                for mark in variant.marks:  # the target unavailable here: skipped with why
                    item.add_marker(mark)
                why = unsupported(target) if target is not None else ""  # None: no target left, skipped
                if why:
                    item.add_marker(pytest.mark.skip(reason=why))
                yield item


class SeedTestItem(TestCaseFunction):
    """One test method of a seed script on one target (and device variant)."""

    def __init__(self, *, target: Target, core_version: str, variant: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # pytest builds a parametrized id from a callspec, which unittest items never get:
        # ``TestAdd::test_add[mlu:cnnl-MLU270]``, as a ``verify`` test on that variant reads
        self._id = self.parent.id.child(self.originalname).with_params(variant)
        self.mlu_target = target
        self.core_version = core_version
        # The run directory is claimed for items that verify: those with an ``mlu_target`` (here
        # a given value, so no fixture is looked up for it).
        self.funcargs["mlu_target"] = target
        self.fixturenames = [*self.fixturenames, "mlu_target"]

    def _getinstance(self) -> Any:
        return self.parent.obj(self.originalname)

    def runtest(self) -> None:
        from mluverify.testing import seed_run

        with seed_run(self._seed_run()):
            super().runtest()

    def _seed_run(self) -> Any:
        from mluverify.pytest_plugin.plugin import _suite_of, _waiver_for, pipeline_key, settings_key
        from mluverify.pytest_plugin.reproducer import reproducer_command
        from mluverify.pytest_plugin.run import report_dir
        from mluverify.testing import SeedRun

        settings = self.config.stash[settings_key]
        reproducer = reproducer_command(self.config, self.nodeid, self.mlu_target, self.core_version,
                                        report_dir(self.config, settings))
        return SeedRun(self.config.stash[pipeline_key], self.mlu_target, self.core_version, self.nodeid,
                       suite=_suite_of(self), reproducer=reproducer,
                       waiver=lambda case: _waiver_for(self, case, settings),
                       settle=lambda outcome, case, note: _settle(outcome, case, note, settings))


def _settle(outcome: Any, case: Case, note: str, settings: Any) -> None:
    """pytest's side of a judged comparison, as for ``verify`` (``_test_outcome``); the
    assertion's message heads a failure."""
    from mluverify.pytest_plugin.plugin import _test_outcome

    __tracebackhide__ = True
    try:
        _test_outcome(outcome, case, settings)
    except pytest.fail.Exception as failure:
        if not note:
            raise
        pytest.fail(f"{note}: {failure.msg}", pytrace=False)
