"""A pytest plugin (registered by ``suites/conftest.py``): what the suites run on compiled
targets, where every distinct graph costs a compile (seconds to a minute when Inductor's caches
are cold).

On a target that compiles each case (a mode its back end lists in ``Backend.compiling_modes``:
``cpu:inductor``, ``cuda:inductor``, the real compilers of the plugins such as ``ort:cpu`` or
``openvino:cpu``):

- the op suites run one drawn case per op x dtype (x the test's other parameters): their
  hypothesis tests draw ``EXAMPLES`` examples instead of the profile's six, hypothesis's simplest
  one (a one-element tensor, which it always tries first) and one drawn case (a hypothesis profile
  derived from the active one, loaded when every requested target is compiled and no
  ``--hypothesis-profile`` was given: hypothesis settings are per process, so a run mixing
  compiled and other targets draws the usual number of examples everywhere);
- the OpInfo suite runs the first sample of each OpInfo entry (the others are deselected);
- the networks run as on any target;
- on the fused targets (``FUSED_MODES``: ``mlu:cnml``, ``mlu:offline``), where every case is
  captured and built into a fused program, the OpInfo suite also runs the first sample of each
  OpInfo entry per core version and precision, and the op suites' hypothesis tests draw
  ``FUSED_EXAMPLES`` examples (the first ones of the profile's sequence); ``mlu:cnnl`` runs every
  sample and example with the same kernels;
- known compiler deviations are waived from the compilers' waiver files ``reports/*/waivers.toml``
  (``reports/inductor/waivers.toml``, ``reports/tvm/waivers.toml``, ...: case-id glob naming the
  target -> ``reason``, ``until``, ``max``; each with a minimal reproducer script beside it), as
  ``mlu_waiver`` marks; a waiver with ``skip = true`` (a case the compiler cannot run at all: no
  lowering, a converter that refuses the graph; there is no verdict to waive) skips the case with
  its reason and expiry, as the training suites' waiver file does.

The suites themselves are not duplicated: this plugin only selects and marks their items.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mluverify.core.backends import BackendRegistry
from mluverify.core.case import Target
from mluverify.core.expectations import Waiver, compiler_waiver_files, load_waivers, marker_fields, waiver_for

FUSED_MODES = ("cnml", "offline")  # each case captured and built into a fused program
FUSED_EXAMPLES = 3
COMPILED_PROFILE = "mluverify-compiled"
# Hypothesis always tries the simplest example first (a one-element tensor: the scalar tail of
# Inductor's loops); the second is a drawn case that reaches its vectorised loops.
EXAMPLES = 2
# The name the pytest front end registers its run under (``mluverify.pytest_plugin.plugin``); the
# run holds the requested targets (``--mlu-target``, else ``[tool.mluverify] targets``). Looked up
# by name, as pytest's own plugins look up "terminalreporter", so this plugin imports no front end.
RUN_PLUGIN = "mluverify-run"


def is_compiled(target: Target | str, registry: BackendRegistry) -> bool:
    """Whether ``target`` (``backend:mode``) compiles each case; a back end ``registry`` does not
    hold compiles nothing here (its cases are skipped as unknown elsewhere)."""
    target = Target.parse(target) if isinstance(target, str) else target
    return target.backend in registry and target.mode in registry.get(target.backend).compiling_modes


def _registry(config: pytest.Config) -> BackendRegistry:
    return config.pluginmanager.get_plugin(RUN_PLUGIN).pipeline.backends


def _target_of(item: pytest.Item) -> Target | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("mlu_target") if callspec is not None else None


def pytest_collection(session: pytest.Session) -> None:
    """Before the test modules are imported (hypothesis binds the default settings then):
    ``EXAMPLES`` examples per hypothesis test when every requested target is compiled."""
    from hypothesis import settings

    config = session.config
    requested = config.pluginmanager.get_plugin(RUN_PLUGIN).targets
    registry = _registry(config)
    if (config.getoption("hypothesis_profile", None) is None and requested
            and all(is_compiled(target, registry) for target in requested)):
        settings.register_profile(COMPILED_PROFILE, settings(settings.default, max_examples=EXAMPLES))
        settings.load_profile(COMPILED_PROFILE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    registry = _registry(config)
    compiled = [item for item in items if _target_of(item) is not None and is_compiled(_target_of(item), registry)]
    fused = [item for item in items if _target_of(item) is not None and _target_of(item).mode in FUSED_MODES]
    repeated = _later_opinfo_samples(compiled + fused)
    if repeated:
        items[:] = [item for item in items if item not in repeated]
        config.hook.pytest_deselected(items=list(repeated))
    waivers = {key: waiver for path in compiler_waiver_files(config.rootpath)
               for key, waiver in load_waivers(path, skippable=True).items()}
    for item in compiled:
        waiver = None if item in repeated else waiver_for(item.nodeid, waivers)
        if waiver is not None:
            item.add_marker(_waiver_mark(waiver))


def _waiver_mark(waiver: Waiver) -> pytest.MarkDecorator:
    """A live ``skip`` waiver as a skip with its reason (an errored case has no value a waiver
    could excuse; after ``until`` the case runs and errors again), any other as ``mlu_waiver``."""
    if waiver.skip and not waiver.expired():
        return pytest.mark.skip(reason=f"waived until {waiver.until}: {waiver.reason}")
    return pytest.mark.mlu_waiver(waiver.reason, waiver.until, **marker_fields(waiver))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A hypothesis test on a fused target draws ``FUSED_EXAMPLES`` examples. Hypothesis reads a
    test's settings from the decorated function at each call (hypothesis.core), and one test
    function serves every target, so they are narrowed for this call only."""
    test = getattr(item, "obj", None)
    original = getattr(test, "_hypothesis_internal_use_settings", None)
    target = _target_of(item)
    if original is None or target is None or target.mode not in FUSED_MODES:
        return (yield)
    from hypothesis import settings

    test._hypothesis_internal_use_settings = settings(original, max_examples=min(original.max_examples, FUSED_EXAMPLES))
    try:
        return (yield)
    finally:
        test._hypothesis_internal_use_settings = original


def _later_opinfo_samples(items: list[pytest.Item]) -> set[pytest.Item]:
    """OpInfo items (a ``case`` parameter with an ``op``) after the first of their entry, target,
    core version and precision."""
    seen: set[tuple[str, ...]] = set()
    later = set()
    for item in items:
        case = item.callspec.params.get("case")
        if getattr(case, "op", None) is None:
            continue
        key = (str(_target_of(item)), str(item.callspec.params.get("mlu_core_version", "")), case.op,
               getattr(case, "dtype", ""))
        if key in seen:
            later.add(item)
        seen.add(key)
    return later

