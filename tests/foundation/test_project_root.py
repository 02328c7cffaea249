"""The CLI and the device find ``[tool.mluverify]`` where pytest finds its rootdir."""
import os

import pytest

from mluverify.project import find_rootdir, project_path


def pytest_rootpath(pytester, cwd, *args):
    """pytest's own rootdir for ``args`` run from ``cwd``."""
    os.chdir(cwd)
    return pytester.parseconfig(*args).rootpath


LAYOUTS = {
    # the project's pyproject.toml configures pytest; tests run from its root or a test directory
    "subdir run": ({"pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = ['tests']\n",
                    "tests/ops/test_a.py": ""}, [("", ["tests/ops"]), ("tests/ops", []), ("tests", ["ops/test_a.py"])]),
    # a pytest.ini above a pyproject.toml without pytest settings: the ini's directory is the root
    "ini in a parent": ({"pytest.ini": "[pytest]\n", "proj/pyproject.toml": "[tool.mluverify]\n",
                         "proj/tests/test_a.py": ""}, [("proj", []), ("proj/tests", []), ("", ["proj/tests"])]),
    # a tox.ini with a [pytest] section beats a setup.cfg without one further down
    "tox.ini": ({"tox.ini": "[tox]\n[pytest]\n", "pkg/setup.cfg": "[metadata]\n", "pkg/t/test_a.py": ""},
                [("pkg", ["t"]), ("pkg/t", [])]),
    # no configuration file at all: setup.py's directory, else the args' and the working directory's ancestor
    "setup.py": ({"lib/setup.py": "", "lib/tests/test_a.py": ""}, [("lib/tests", []), ("", ["lib/tests"])]),
    "no ini at all": ({"a/b/test_a.py": "", "c/test_c.py": ""},
                      [("a", ["b"]), ("a/b", []), ("", ["a/b", "c"]), ("a", ["b/test_a.py::test_x"])]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_rootdir_rule_is_pytests(pytester, monkeypatch, layout):
    files, runs = LAYOUTS[layout]
    monkeypatch.chdir(pytester.path)
    for name, text in files.items():
        (pytester.path / name).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / name).write_text(text)
    for cwd, args in runs:
        expected = pytest_rootpath(pytester, pytester.path / cwd, *args)
        assert find_rootdir(args, pytester.path / cwd) == expected, (cwd, args)


def test_project_paths_are_relative_to_the_working_directory_below_it(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert str(project_path(tmp_path, "reports/latest")) == os.path.join("reports", "latest")
    monkeypatch.chdir(tmp_path / "sub")  # the root is above: absolute
    assert project_path(tmp_path, "reports/latest") == tmp_path / "reports" / "latest"
