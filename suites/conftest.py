"""Set-up shared by every suite: the device precision fixture, the heavy-case opt-in and the
golden reference of the op suites.

``dtype`` parametrizes a test over the precisions the device computes in (the CPU reference
stays float32). Cases marked ``mlu_heavy`` run only with ``--mlu-heavy``; the default selection
(``make verify``, at most 10 minutes on 2 cores) leaves out the full-size (224x224) ResNet50 /
VGG19 cases and their reduced-size variants beyond float32 (and int8 ResNet50). Cases of the
op-level suites (``GOLDEN_SUITES``) are judged against a float64 CPU result as well (marker
``mlu_golden``); the network suites opt in with ``--mlu-golden``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from mluverify import hookimpl

DEVICE_DTYPES = ("float32", "float16")
# Op-level suites: each case is also judged against float64 (device and reference error recorded).
GOLDEN_SUITES = ("ops", "opinfo", "captured", "conformance")
ZOO_SUITE = "zoo"  # collected only when asked: see pytest_ignore_collect
_RECORDS: list[dict] = []  # every record this process made (hook mluverify_record)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mluverify").addoption(
        "--mlu-heavy", action="store_true",
        help="also run the heavy suite cases (full-size ResNet50 / VGG19 in every precision)")
    parser.getgroup("mluverify").addoption(
        "--mlu-zoo", action="store_true",
        help="also collect the model zoo (suites/zoo) when a run names a directory above it; "
             "naming suites/zoo itself collects it anyway (make verify-zoo)")
    parser.getgroup("mluverify").addoption(
        "--mlu-zoo-model", action="append", default=[], metavar="NAME",
        help="run only this zoo model (repeatable; names: suites/zoo/timm_models_list.txt, suites/zoo/zoo_hf.py)")
    parser.getgroup("mluverify").addoption(
        "--mlu-zoo-expected", type=Path, default=None, metavar="PATH",
        help="the zoo's expected statuses (default suites/zoo/expected_status.toml; e.g. one file per device)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mlu_heavy: a heavy case (full-size network); runs with --mlu-heavy")
    config.pluginmanager.import_plugin("mluverify.plugins.compiled_selection")  # compiled targets' selection


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suites = Path(__file__).parent
    for item in items:
        if _suite_of(item.path, suites) in GOLDEN_SUITES and not item.get_closest_marker("mlu_golden"):
            item.add_marker(pytest.mark.mlu_golden)
    if config.getoption("mlu_heavy"):
        return
    opt_in = pytest.mark.skip(reason="heavy case, not in the default selection: run with --mlu-heavy")
    for item in items:
        if item.get_closest_marker("mlu_heavy"):
            item.add_marker(opt_in)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The model zoo (hundreds of whole models per target) stays out of ``mluverify run suites``
    / ``make verify``: collected only when asked (``--mlu-zoo``) or named (a path in it)."""
    zoo = Path(__file__).parent / ZOO_SUITE
    if collection_path != zoo or config.getoption("mlu_zoo"):
        return None
    named = (Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args)
    return True if not any(path == zoo or zoo in path.parents for path in named) else None


def _suite_of(path: Path, suites: Path) -> str:
    try:
        return path.relative_to(suites).parts[0]
    except (ValueError, IndexError):
        return ""


@pytest.fixture(params=DEVICE_DTYPES)
def dtype(request: pytest.FixtureRequest) -> str:
    """The precision the device computes in (float32 or float16)."""
    return request.param


@hookimpl
def mluverify_record(record: dict) -> None:
    _RECORDS.append(record)


@hookimpl
def mluverify_report(outdir: Path) -> None:
    """The model zoo's dashboard (``zoo.md``, ``zoo.html``) when the run ran zoo cases: here, not
    in suites/zoo, because a pytest-xdist controller never loads the zoo's conftest.py."""
    from zoo.zoo_status import write_dashboard

    write_dashboard(Path(outdir))


@pytest.fixture
def records() -> list[dict]:
    """The records (one per comparison, as written to the run's report) this test makes,
    in order: the list grows as the test calls ``verify``."""
    _RECORDS.clear()
    return _RECORDS
