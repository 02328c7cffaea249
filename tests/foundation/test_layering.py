"""The core imports only what it needs; the pytest plugin is reached by its entry point, and
`-p mluverify` still works where the entry point is not installed; the package's import graph has
no cycles and no import from a lower layer to a higher one."""
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import mluverify

CORE = ("mluverify", "mluverify.judge", "mluverify.report", "mluverify.report.records",
        "mluverify.report.gate", "mluverify.report.rundir", "mluverify.core.case", "mluverify.core.backends",
        "mluverify.core.pipeline", "mluverify.core.config", "mluverify.core.hookspecs", "mluverify.core.plugin_manager",
        "mluverify.cli")

LOADED = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in ("pytest", "_pytest", "torch", "pandas", "pyarrow") if m in sys.modules)))
"""

# pluggy finds pytest11 entry points through importlib.metadata.distributions(): hide ours
WITHOUT_ENTRY_POINT = """
import importlib.metadata as metadata, sys
everything = metadata.distributions
metadata.distributions = lambda **kw: (d for d in everything(**kw) if d.metadata["Name"] != "mluverify")
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_the_core_imports_neither_pytest_nor_torch_nor_pandas():
    out = subprocess.run([sys.executable, "-c", LOADED, *CORE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_public_names_exist():
    assert all(hasattr(mluverify, name) for name in mluverify.__all__)
    assert not any(name.startswith("pytest_") for name in mluverify.__all__)


def test_dash_p_mluverify_works_without_the_entry_point(pytester):
    pytester.makepyfile(test_add="""
import torch

def test_add(verify):
    verify(torch.add, torch.ones(4), torch.ones(4), op="add")
""")
    script = pytester.path / "without_entry_point.py"
    script.write_text(WITHOUT_ENTRY_POINT)
    result = pytester.run(sys.executable, str(script), "-p", "mluverify", "-p", "no:cacheprovider",
                          "--mlu-target=cpu64:eager", f"--mlu-report={pytester.path / 'run'}")
    result.assert_outcomes(passed=1)
    assert "mluverify-" not in result.stdout.str().split("plugins:", 1)[-1].splitlines()[0]  # not autoloaded
    assert (pytester.path / "run" / "records.parquet").exists()


# The layers, lowest first, and what each may import. The device, the dump and the fuzzer are
# leaves beside the core: they see only the base and the judge, so that a plugin (or a front end)
# connects them to the rest. "base" is what everything may import: the errors, the version, the project root rule and
# the device's keys of [tool.mluverify] (checked by the core at start-up, read by the device).
# The tuner (mluverify.tune) runs trials on the device, or on a real int8 runtime through that
# runtime's plugin (ort:int8, openvino:int8), and writes report pages: it sits above the plugins,
# below the front ends.
MAY_IMPORT = {
    "base": {"base"},
    "judge": {"base", "judge"},
    "core": {"base", "judge", "core"},
    "device": {"base", "judge", "device"},
    "dump": {"base", "judge", "dump"},
    "fuzz": {"base", "judge", "fuzz"},
    "report": {"base", "judge", "core", "dump", "report"},
    "plugins": {"base", "judge", "core", "device", "dump", "fuzz", "report", "plugins"},
    "tune": {"base", "judge", "core", "device", "dump", "report", "plugins", "tune"},
    "front end": {"base", "judge", "core", "device", "dump", "fuzz", "report", "plugins", "tune", "front end"},
}
# the layer of each module by its first name under mluverify (mluverify itself: the re-exports)
LAYER_OF = {
    "errors": "base", "_version": "base", "project": "base", "device_keys": "base", "judge": "judge", "core": "core",
    "device": "device", "device_hookspecs": "device", "dump": "dump", "fuzz": "fuzz", "report": "report", "plugins": "plugins", "tune": "tune", "pytest_plugin": "front end",
    "cli": "front end", "compat": "front end", "strategies": "front end", "testing": "front end",
}
PACKAGE = Path(mluverify.__file__).parent
# calls that import the module named by their first argument, when it is a literal
DYNAMIC_IMPORTS = ("importlib.import_module", "import_module", "__import__", "sys.modules.get")


def package_modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path, node: ast.AST) -> list[str]:
    """The dotted names ``node`` imports, as written (relative imports made absolute).

    ``from package import name`` imports the submodule ``package.name`` where there is one, else
    ``package`` itself. A literal ``importlib.import_module("...")`` or ``sys.modules["..."]``
    reaches a module as surely as an import statement does, so it counts as one.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            kept = len(parts) - node.level + (path.name == "__init__.py")
            base = ".".join(parts[:kept] + ([base] if base else []))
        return [f"{base}.{alias.name}" for alias in node.names]
    literal = None
    if isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC_IMPORTS and node.args:
        literal = node.args[0]
    elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
        literal = node.slice
    if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
        return [literal.value]
    return []


def import_edges() -> Iterator[tuple[str, str, str]]:
    """(importer, imported module of the package, file:line) for every import in the package.

    Imports inside functions count, and so do those under ``if TYPE_CHECKING:``: an annotation
    naming a higher layer's type is a dependency on that layer all the same. A package's
    ``__init__`` importing its own submodules is the package's face, not a dependency.
    """
    modules = package_modules()
    for module, path in sorted(modules.items()):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in imported_names(module, path, node):
                while name and name not in modules:  # from package.module import function
                    name = name.rpartition(".")[0]
                if name and name != module and not name.startswith(module + "."):
                    edges.add((node.lineno, name))
        for line, name in sorted(edges):
            yield module, name, f"{path.relative_to(PACKAGE.parent)}:{line}"


def layer(module: str) -> str:
    first = module.split(".")[1] if "." in module else None
    return "front end" if first is None else LAYER_OF[first]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node):]
                    del stack[stack.index(node):]
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_finds_a_loop_and_leaves_a_chain_alone():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_edges_include_imports_inside_functions_and_relative_ones():
    tree = ast.parse("def f():\n    from . import x\n    import mluverify.errors\n")
    path = PACKAGE / "report" / "records.py"
    names = [name for node in ast.walk(tree) for name in imported_names("mluverify.report.records", path, node)]
    assert sorted(names) == ["mluverify.errors", "mluverify.report.x"]


def test_every_module_has_a_layer():
    assert [module for module in package_modules() if module != "mluverify"
            and module.split(".")[1] not in LAYER_OF] == []


def test_the_package_has_no_import_cycles():
    edges: dict[str, set[str]] = {}
    for importer, imported, _ in import_edges():
        edges.setdefault(importer, set()).add(imported)
    found = [" <-> ".join(component) for component in cycles(edges)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_no_module_imports_from_a_higher_layer():
    offending = [f"{where}: {importer} ({layer(importer)}) imports {imported} ({layer(imported)})"
                 for importer, imported, where in import_edges()
                 if layer(imported) not in MAY_IMPORT[layer(importer)]]
    assert not offending, "imports from a higher layer:\n" + "\n".join(offending)


def test_no_package_archive_is_committed():
    """Dependencies install from the registry (pyproject.toml); a wheel or sdist in the tree is
    a stray copy that drifts from the declared version."""
    root = Path(mluverify.__file__).resolve().parents[1]
    tracked = subprocess.run(["git", "ls-files", "*.whl", "*.tar.gz", "*.zip", "*.egg"], cwd=root,
                             capture_output=True, text=True, check=True).stdout.split()
    assert tracked == []
