"""One pytest run's report directory, from claim to swap, and its failing cases' reproducers.

Registered by ``mluverify.pytest_plugin.plugin`` in every process of a run (``pytest_configure``):

- the controller claims the directory (``mluverify.report.rundir``) when it knows the run
  verifies something: after collection, if a collected test uses ``verify`` (under
  pytest-xdist: if a collected test id names a requested target, before any test is
  scheduled). ``--help``, ``--collect-only``, start-up errors and runs that collect no
  verifying test never touch it;
- workers are handed the staging directory (it is known before the claim) and the run id;
- at the end, a run that recorded comparisons is merged, reported, gated and swapped in; one
  that recorded none leaves the directory as it was;
- a failing test's report gets a section with the reproducers of its failing cases.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from mluverify.core.config import Settings
from mluverify.errors import MluverifyError
from mluverify.core.hookspecs import hookimpl
from mluverify.report.completeness import INTERRUPTED, RunCompleteness, at_claim, at_end
from mluverify.report.rundir import RunDirectory
from mluverify.core.pipeline import Pipeline

REPRODUCER_SECTION = "mluverify reproducer"


def _junit_xml(config: pytest.Config) -> Any:
    """pytest's JUnit XML writer of this run (``--junitxml``), or None."""
    from _pytest.junitxml import xml_key

    return config.stash.get(xml_key, None)


def report_dir(config: pytest.Config, settings: Settings) -> Path:
    """The run's report directory: ``--mlu-report``, else ``[tool.mluverify] report_dir``."""
    return Path(config.getoption("mlu_report") or config.rootpath / settings.report_dir)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def selected_paths(args: list[str], base: Path, rootdir: Path) -> list[str] | None:
    """The paths and node ids among pytest's ``args`` (relative to ``base``) as node ids
    relative to ``rootdir`` (``suites/ops``, ``suites/ops/test_x.py::test_y``): what they hold is
    what the run selected. None when one is the rootdir itself, lies outside it or is no path
    (``--pyargs`` names a package): no scope."""
    root = os.path.normpath(rootdir)
    prefixes = []
    for arg in args:
        path, separator, inside = arg.partition("::")
        relative = os.path.relpath(os.path.normpath(base / path), root)
        if relative == os.curdir or relative.startswith(os.pardir) or not (base / path).exists():
            return None
        prefixes.append(Path(relative).as_posix() + separator + inside)
    return prefixes or None


def missing_paths(args: list[str], base: Path) -> list[str]:
    """The test paths among ``args`` (paths or node ids, relative to ``base``) that do not exist."""
    return [arg for arg in args if not (base / arg.split("::", 1)[0]).exists()]


class PytestRun:
    """The report directory and records of one pytest run (an instance per process)."""

    def __init__(self, config: pytest.Config, pipeline: Pipeline, directory: RunDirectory,
                 targets: list[str]) -> None:
        self.config = config
        self.pipeline = pipeline
        self.directory = directory
        self.targets = set(targets)  # the requested targets (how a verifying test's id reads)
        self.claimed = False
        self.selected: list[str] | None = None  # the tests this run kept after collection
        self.deselected = 0  # how many it dropped (-k, -m, --deselect, pytest-split, ...)
        self.failing: dict[str, list[str]] = {}  # test id -> reproducers of its failing cases
        self.ran: set[str] = set()  # the tests that reached their teardown (controller side)
        self.completeness: RunCompleteness | None = None  # how the run ended, once it has
        self.published: Path | None = None  # where the finished run was swapped in
        self._off_progress_line = False

    # --- claiming, controller side ---------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if is_worker(self.config):
            return
        self._check_baseline()
        # xdist: only workers collect, and a missing path would be a worker's error that ends
        # the run with no test and no word why
        missing = missing_paths(self.config.args, self.config.invocation_params.dir)
        if missing and self.config.pluginmanager.has_plugin("dsession"):
            raise pytest.UsageError(f"file or directory not found: {', '.join(missing)}")

    def _check_baseline(self) -> None:
        """A missing or unreadable ``--mlu-baseline`` stops the run before its tests, not after."""
        from mluverify.report.loading import migrate, read_table, records_path

        baseline = self.config.getoption("mlu_baseline")
        if baseline:
            try:
                path = records_path(Path(baseline))
                migrate(read_table(path), path)
            except MluverifyError as exc:
                raise pytest.UsageError(f"mluverify: --mlu-baseline: {exc}") from None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        example = self.config.getoption("mlu_reproduce_failure")
        if example:
            from mluverify.pytest_plugin.reproducer import apply_example

            apply_example(items, example)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if is_worker(self.config):
            return
        self.selected = [item.nodeid for item in session.items]
        verifies = any("mlu_target" in getattr(item, "fixturenames", ()) for item in session.items)
        if verifies and not self.claimed and not self.config.option.collectonly:
            self._claim()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """pytest-xdist: every worker collects (and deselects) alike; the first one's ids say,
        before any test is scheduled, whether the run verifies something (the controller sees no
        items, only ids: a verifying test's id names its target, ``test_x[mlu:cnnl-float16]``)."""
        if self.selected is not None:
            return
        self.selected = list(ids)
        if any(self.targets & set(test_id.partition("[")[2].rstrip("]").split("-")) for test_id in ids):
            self._claim()  # a UsageError here stops the run before scheduling; xdist stops its workers

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker's deselections (each worker deselects the same tests)."""
        self.deselected = max(self.deselected, getattr(node, "workeroutput", {}).get("mluverify_deselected", 0))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist: every worker records under the controller's run id, into its directory."""
        node.workerinput["mluverify_run_id"] = self.pipeline.run_id
        node.workerinput["mluverify_run_dir"] = str(self.directory.staging)

    def _claim(self) -> None:
        from mluverify.report.records import run_metadata, write_metadata

        try:
            staging = self.directory.claim()
            self.claimed = True
            # incomplete until its end is recorded: a run killed from here on says so by itself
            write_metadata(staging, {**run_metadata(self.pipeline.run_id),
                                     **at_claim(len(self.selected or ())).as_metadata()})
        except MluverifyError as exc:
            raise pytest.UsageError(f"mluverify: {exc}") from None
        for note in self.directory.notes:
            self._write_line(f"mluverify: {note}")

    # --- reproducers, every process ----------------------------------------------------------

    @hookimpl
    def mluverify_record(self, record: dict[str, Any]) -> None:
        if record.get("status") != "passed" and record.get("reproducer"):
            commands = self.failing.setdefault(record["case_id"].split("#", 1)[0], [])
            if record["reproducer"] not in commands:
                commands.append(record["reproducer"])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if report.when == "call":
            commands = self.failing.pop(item.nodeid, [])
            if report.failed and commands:
                report.sections.append((REPRODUCER_SECTION, "\n".join(commands)))
        return report

    # --- the end -------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and not is_worker(self.config):
            self.ran.add(report.nodeid)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        """Before the other plugins finish (pytest's JUnit XML among them, which then says so):
        how the run ended. After them, before the terminal summary: the run's records merged,
        reported, gated and swapped in."""
        if not is_worker(self.config) and self.claimed:
            self.completeness = at_end(len(self.ran), len(self.selected or ()),
                                       interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
            junit = _junit_xml(self.config)
            if junit is not None and not self.completeness.complete:
                junit.add_global_property("mluverify_incomplete", self.completeness.headline)
        result = yield
        self.pipeline.close()
        if is_worker(self.config):
            self.config.workeroutput["mluverify_deselected"] = self.deselected
            return result
        status = self._finish()
        self._point_junit_at_the_published_run()
        if status and session.exitstatus == 0:
            session.exitstatus = status
        return result

    def _point_junit_at_the_published_run(self) -> None:
        """``mluverify run`` writes the JUnit XML into the run being built, which is renamed at
        its end: the path pytest prints afterwards is the published one. A run that claimed
        nothing leaves no half-built directory with only that file in it."""
        junit = _junit_xml(self.config)
        if junit is None:
            return
        written = Path(junit.logfile)
        if written.parent.resolve() != self.directory.staging.resolve():
            return
        if self.published is not None:
            junit.logfile = str(self.published / written.name)
        elif not self.claimed and written.parent.is_dir() and set(os.listdir(written.parent)) <= {written.name}:
            shutil.rmtree(written.parent)  # another run's staging holds its run.json: never this
            junit.logfile = "(none: the run verified nothing)"
        elif not written.exists():  # the staging of a run that recorded nothing was discarded
            junit.logfile = "(none: the run verified nothing)"

    def _publish(self) -> Path:
        """Swap the finished run in; the JUnit path printed afterwards follows it."""
        self.published = self.directory.publish()
        return self.published

    def _finish(self) -> int:
        from mluverify.report.rundir import holds_records
        from mluverify.report.finish import finish_empty_run, finish_run

        gate = bool(self.config.getoption("mlu_gate"))
        if not self.claimed:  # nothing verifying was collected
            return finish_empty_run(self.directory.path, gate=gate, terminal_write=self._write_line) if gate else 0
        staging = self.directory.staging
        if not holds_records(staging):
            self.directory.discard()
            return finish_empty_run(self.directory.path, gate=gate, terminal_write=self._write_line)
        baseline = self.config.getoption("mlu_baseline")
        try:
            self._keep_run_facts(staging)
            return finish_run(staging, pm=self.pipeline.pm, settings=self.pipeline.settings,
                              baseline=Path(baseline) if baseline else None, gate=gate,
                              terminal_write=self._write_line, selected=self._partial_selection(),
                              publish=self._publish,
                              allow_incomplete=bool(self.config.getoption("mlu_allow_incomplete")))
        except Exception as exc:  # named errors, and bugs in a report: the records come first
            what = str(exc) if isinstance(exc, MluverifyError) else f"{type(exc).__name__}: {exc}"
            self._write_line(f"mluverify: reports failed: {what}")
            self._write_line(f"mluverify: every record written is kept in {staging}; "
                             f"`mluverify report {staging}` writes its report")
            return 1

    def _partial_selection(self) -> list[str] | None:
        """What the run selected, when it left something out: the selected tests when some
        were deselected (-k, -m, ...), else the paths and node ids it was given (a baseline case
        of a test left out is not missing; a deleted test under a given path is); None for a
        whole run, which misses every baseline case it lacks, a deleted test's included."""
        if self.deselected:
            return self.selected
        return selected_paths(self.config.args, self.config.invocation_params.dir, self.config.rootpath)

    def _keep_run_facts(self, staging: Path) -> None:
        """What the run selected when it left something out (for the gate), and how the run
        ended (an incomplete run's records are reported, but it passes no gate and is no
        baseline)."""
        from mluverify.report.records import read_metadata, write_metadata, write_selected

        ended = self.completeness.stated_in(read_metadata(staging))
        write_metadata(staging, ended | {"interrupted": self.completeness.reason == INTERRUPTED})
        selection = self._partial_selection()
        if selection is not None:
            write_selected(staging, selection)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.directory.release()
        self.pipeline.pm.unregister(self)

    def _write_line(self, line: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            print(line)
            return
        if not self._off_progress_line:  # xdist's reporter does not track its progress line
            terminal.write_line("")
            self._off_progress_line = True
        terminal.write_line(line)
