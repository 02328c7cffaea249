"""torch_mlu compatibility: run Cambricon's scripts unchanged on the emulated MLU.

``install()`` adds an import finder (at the *end* of ``sys.meta_path``, so an installed real
``torch_mlu`` always wins) that resolves

===========================================  ===================================================
``torch_mlu``                                 a package whose import registers ``mlu`` (and
                                              ``torch.backends.mlufusion``)
``torch_mlu.core``                            a package
``torch_mlu.core.mlu_model``                  ``mluverify.device.mlu_model``
``torch_mlu.core.mlu_quantize``               ``mluverify.device.quantization``
``torch_mlu.core.dumptool``                   ``mluverify.dump``
``torch_mlu.core.quantized``                  a package
``torch_mlu.core.quantized.modules`` (cnq)    ``mluverify.device.quantization`` (MLULinear, MLUConv*)
``torch_mlu.core.quantized.default_mappings`` ``mluverify.device.quantization.default_mappings``
===========================================  ===================================================

Targets are imported only when their alias is, so a missing one fails with an ImportError
naming both. ``exec_script`` runs a script as ``__main__`` with the finder installed
(``mluverify exec script.py``). Importing this module imports neither torch nor the device.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import types
from typing import Iterator, Sequence

from mluverify.errors import InvalidArgument

ALIASES: dict[str, str] = {
    "torch_mlu.core.mlu_model": "mluverify.device.mlu_model",
    "torch_mlu.core.mlu_quantize": "mluverify.device.quantization",
    "torch_mlu.core.dumptool": "mluverify.dump",
    "torch_mlu.core.quantized.modules": "mluverify.device.quantization",
    "torch_mlu.core.quantized.default_mappings": "mluverify.device.quantization.default_mappings",
}
PACKAGES: tuple[str, ...] = ("torch_mlu", "torch_mlu.core", "torch_mlu.core.quantized")


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str | None) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.target is None:
            package = types.ModuleType(spec.name, f"{spec.name}: emulated by mluverify")
            package.__path__ = []
            package.__getattr__ = _submodule_getter(spec.name)
            if spec.name == "torch_mlu":
                importlib.import_module("mluverify.device")  # `import torch_mlu` registers the device
            return package
        try:
            return importlib.import_module(self.target)
        except ImportError as exc:
            raise ImportError(
                f"{spec.name} is emulated by {self.target}, which could not be imported: {exc}",
                name=spec.name,
            ) from exc

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the target module is already executed."""


def _submodule_getter(package: str):
    """``torch_mlu.core.mlu_model`` as an attribute, importing the alias on first access."""

    def __getattr__(name: str) -> types.ModuleType:
        fullname = f"{package}.{name}"
        if fullname in ALIASES or fullname in PACKAGES:
            return importlib.import_module(fullname)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


class TorchMluFinder(importlib.abc.MetaPathFinder):
    """Resolves ``torch_mlu`` names to mluverify modules (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        if fullname in ALIASES:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(ALIASES[fullname]))
        return None


def real_torch_mlu_installed() -> bool:
    """Whether a real ``torch_mlu`` can be imported (ours sits last, so a real one is found first)."""
    spec = importlib.util.find_spec("torch_mlu")
    return spec is not None and not isinstance(spec.loader, _AliasLoader)


def install() -> bool:
    """Make ``torch_mlu`` imports resolve to mluverify; False (and nothing done) if a real
    ``torch_mlu`` is installed. Idempotent."""
    if real_torch_mlu_installed():
        return False
    if not any(isinstance(f, TorchMluFinder) for f in sys.meta_path):
        sys.meta_path.append(TorchMluFinder())
    return True


def uninstall() -> None:
    """Remove the finder and every ``torch_mlu`` alias from ``sys.modules``."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchMluFinder)]
    for name in (*PACKAGES, *ALIASES):
        module = sys.modules.get(name)
        if module is not None and isinstance(getattr(module.__spec__, "loader", None), _AliasLoader):
            del sys.modules[name]


def exec_script(path: str | os.PathLike, argv: Sequence[str] = ()) -> int:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *argv]`` and the finder installed.

    Returns the script's exit code (0 when it ends normally, the ``SystemExit`` code otherwise).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InvalidArgument(f"script {path!r} does not exist or is not a file")
    install()
    saved_argv = sys.argv
    sys.argv = [path, *argv]
    try:
        with script_folder_on_path(path):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return _exit_code(exc.code)
    finally:
        sys.argv = saved_argv
    return 0


@contextlib.contextmanager
def script_folder_on_path(path: str | os.PathLike) -> Iterator[None]:
    """Put the script's folder first on ``sys.path`` for the block, as ``python script.py``
    does, so the script imports the modules beside it; removed after."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
