"""Where a project's root is: pytest's rootdir rule, for the front ends and the device alike.

Ground level: imports only the standard library, so every layer may use it (the emulated device
included, which imports nothing else of the package but ``mluverify.errors`` and the judge).
``[tool.mluverify]`` is read from ``pyproject.toml`` in this root: under pytest
``config.rootpath`` (the same rule, applied by pytest), in the CLI and the device
``find_rootdir``.
"""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Iterable

# pytest's configuration files, in the order pytest tries them in each directory.
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini",
                "setup.cfg")
PYPROJECT = "pyproject.toml"


def find_rootdir(args: Iterable[str | os.PathLike] = (), invocation_dir: Path | None = None) -> Path:
    """The directory pytest would take as its rootdir for ``args`` (test paths or node ids;
    options are ignored) run from ``invocation_dir`` (default: the working directory).

    From the common ancestor of the args that exist (else ``invocation_dir``), upwards: the
    first directory holding a pytest configuration file (``pytest.ini``, a ``pyproject.toml``
    with a ``[tool.pytest]`` table, ``tox.ini`` with ``[pytest]``, ``setup.cfg`` with
    ``[tool:pytest]``), else the first holding a ``pyproject.toml``, else one holding
    ``setup.py``, else the common ancestor of ``invocation_dir`` and the args'.
    (``--rootdir`` and ``-c`` are not read: pass what they name instead.)
    """
    invocation_dir = Path(invocation_dir or Path.cwd()).resolve()
    dirs = _dirs_of(args, invocation_dir)
    ancestor = _common_ancestor(dirs) or invocation_dir
    found = _config_dir(ancestor)
    if found is not None:
        return found
    with_setup_py = next((d for d in (ancestor, *ancestor.parents) if (d / "setup.py").is_file()), None)
    if with_setup_py is not None:
        return with_setup_py
    for directory in dirs if dirs != [ancestor] else ():
        found = _config_dir(directory)
        if found is not None:
            return found
    fallback = _common_ancestor([invocation_dir, ancestor])
    return ancestor if fallback is None or fallback == Path(fallback.anchor) else fallback


def _dirs_of(args: Iterable[str | os.PathLike], base: Path) -> list[Path]:
    """The existing directories the path args name (a file: its directory)."""
    dirs = []
    for arg in map(str, args):
        if arg.startswith("-"):
            continue
        path = Path(os.path.abspath(base / arg.split("::", 1)[0]))
        if path.exists():
            dirs.append(path if path.is_dir() else path.parent)
    return dirs


def _common_ancestor(paths: list[Path]) -> Path | None:
    if not paths:
        return None
    try:
        return Path(os.path.commonpath(paths))
    except ValueError:  # paths on different drives
        return None


def _config_dir(start: Path) -> Path | None:
    """The first directory at or above ``start`` with a pytest configuration file, else the
    first with a pyproject.toml (pytest takes it as its configuration file then)."""
    first_pyproject = None
    for directory in (start, *start.parents):
        for name in CONFIG_FILES:
            path = directory / name
            if not path.is_file():
                continue
            if name == PYPROJECT and first_pyproject is None:
                first_pyproject = directory
            if _configures_pytest(path):
                return directory
    return first_pyproject


def _configures_pytest(path: Path) -> bool:
    """Whether pytest takes ``path`` as its configuration file (invalid files are left to
    pytest and to the settings loader to report)."""
    if path.name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):
        return True
    if path.name == PYPROJECT:
        try:
            tool_pytest = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("pytest")
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError, AttributeError):
            return False
        return isinstance(tool_pytest, dict) and bool(tool_pytest)
    section = "pytest" if path.name == "tox.ini" else "tool:pytest"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(rf"^\[{re.escape(section)}\]\s*$", text, re.MULTILINE) is not None


def pyproject_of(rootdir: Path) -> Path:
    """The ``pyproject.toml`` that holds ``[tool.mluverify]`` for a project rooted at ``rootdir``."""
    return Path(rootdir) / PYPROJECT


def project_path(rootdir: Path, path: str | os.PathLike) -> Path:
    """``path``, relative to ``rootdir`` (as ``[tool.mluverify]`` paths are), as the working
    directory sees it: relative below it (``reports/latest`` from the root), else absolute."""
    joined = Path(rootdir) / path
    try:
        return joined.relative_to(Path.cwd())
    except ValueError:
        return joined
