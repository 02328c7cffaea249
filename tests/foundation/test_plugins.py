"""Plugins however they come (-p, conftest.py at start or found while collecting, entry point):
a mluverify_* function that is no hook is an error naming the plugin and the nearest hook, and
back ends of a conftest.py below the command-line paths are found."""
import os
import subprocess
import sys
import textwrap

import pytest

from mluverify import hookimpl
from mluverify.errors import PluginError
from mluverify.core.plugin_manager import check_plugin, new_plugin_manager

SUITE = """
import torch

def test_add(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
"""

MISSPELLED = """
from mluverify import hookimpl

@hookimpl
def mluverify_add_backend(registry):
    pass
"""

UNDECORATED = """
def mluverify_tolerance(case):
    return None
"""

# A back end whose results are 1 % off: only a conftest.py adds it.
SCALED_BACKEND = """
from mluverify import Backend, Execution, hookimpl

class Scaled(Backend):
    name = "scaled"
    modes = {"cnml": "cnml"}

    def execute(self, fn, args, kwargs, *, case):
        return Execution(fn(*args, **kwargs) * 1.01, ())

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Scaled())
"""


def run_below_a_conftest(pytester, conftest, *args):
    """``pytest tests`` where only ``tests/sub/conftest.py`` (found while collecting) has ``conftest``."""
    sub = pytester.mkdir("tests") / "sub"
    sub.mkdir()
    (sub / "conftest.py").write_text(conftest)
    (sub / "test_add.py").write_text(SUITE)
    return pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={pytester.path / 'run'}", *args, "tests")


class _Misspelled:
    @hookimpl
    def mluverify_metric(self):
        return {}


class _Undecorated:
    def mluverify_record(self, record):
        pass


class _Fine:
    @hookimpl
    def mluverify_record(self, record):
        pass


def test_a_misspelled_hook_names_the_plugin_and_the_nearest_hook():
    pm = new_plugin_manager(entry_points=False)
    with pytest.raises(PluginError, match=r"_Misspelled.*mluverify_metric is not a mluverify hook; "
                                          r"did you mean mluverify_metrics\?"):
        check_plugin(pm, _Misspelled())


def test_a_hook_without_hookimpl_is_refused_not_ignored():
    pm = new_plugin_manager(entry_points=False)
    with pytest.raises(PluginError, match="mluverify_record is not decorated with @mluverify.hookimpl"):
        check_plugin(pm, _Undecorated())
    check_plugin(pm, _Fine())  # the same, decorated, is fine


def test_a_misspelled_hook_in_a_dash_p_plugin_stops_pytest(pytester):
    pytester.makepyfile(myplugin=MISSPELLED, test_add=SUITE)
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "myplugin", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'run'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*plugin 'myplugin'*mluverify_add_backend is not a mluverify hook; "
                                 "did you mean mluverify_add_backends?*"])
    assert not (pytester.path / "run").exists()


def test_an_undecorated_hook_in_conftest_stops_pytest(pytester):
    pytester.makeconftest(UNDECORATED)
    pytester.makepyfile(test_add=SUITE)
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'run'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*conftest*mluverify_tolerance is not decorated with @mluverify.hookimpl*"])


def test_a_misspelled_hook_in_a_conftest_found_while_collecting_is_named(pytester):
    result = run_below_a_conftest(pytester, MISSPELLED, "--mlu-target=cpu64:eager")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*ERROR collecting tests/sub*",
                                 "*tests/sub/conftest.py*mluverify_add_backend is not a mluverify hook; "
                                 "did you mean mluverify_add_backends?*"])


def test_a_back_end_of_a_conftest_below_the_given_path_is_found(pytester):
    result = run_below_a_conftest(pytester, SCALED_BACKEND, "--mlu-target=scaled:cnml")
    result.assert_outcomes(passed=1)  # 1 % is within cnml's 2 %


def test_a_target_no_conftest_adds_is_an_error_naming_it(pytester):
    result = run_below_a_conftest(pytester, SCALED_BACKEND, "--mlu-target=scaled:cnnx")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown target 'scaled:cnnx'; valid:*'scaled:cnml'*"])
    assert not (pytester.path / "run").exists()


def test_a_misspelled_hook_in_an_entry_point_plugin_is_named(tmp_path):
    site = tmp_path / "site"
    (site / "badplugin-1.0.dist-info").mkdir(parents=True)
    (site / "badplugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: badplugin\nVersion: 1.0\n")
    (site / "badplugin-1.0.dist-info" / "entry_points.txt").write_text("[mluverify]\nbad = badplugin\n")
    (site / "badplugin.py").write_text(textwrap.dedent(MISSPELLED))
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", "from mluverify.core.plugin_manager import new_plugin_manager as n; n()"],
                         env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "plugin 'bad'" in out.stderr and "did you mean mluverify_add_backends?" in out.stderr
