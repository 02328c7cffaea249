"""Where each op of a dump goes, and under which argument names: pure decisions.

Cambricon's layout numbers the ops under each parent from 1 (``{N}_{op}/``). A torch-level
call (``conv2d``) is the parent of the aten ops it runs (``1_conv2d/1_convolution/``); a
call that runs an aten op of its own name first (``torch.add`` -> ``aten.add``) *is* that
op's directory, as in Cambricon's ``2_add/`` holding ``mlu_self`` and ``1_fill_/``. A call
that runs no aten op (``Tensor.dim``) gets no directory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mluverify.errors import InvalidArgument

# Ops never dumped: copy_ moves data between devices and memory (Cambricon leaves it out).
EXCLUDED_OPS = frozenset({"copy_", "_copy_from", "_copy_from_and_resize"})
# Ops whose outputs are uninitialised memory: no CPU re-run can reproduce them.
UNINITIALISED_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty",
                               "new_empty_strided", "empty_permuted"})


def resolve_dump_dir(dump_dir: str | os.PathLike[str]) -> Path:
    """``dump_dir``, or ``dump_dir_1``, ``dump_dir_2``, ... if it exists (never overwritten)."""
    base = Path(dump_dir)
    candidate, suffix = base, 0
    while candidate.exists():
        suffix += 1
        candidate = base.with_name(f"{base.name}_{suffix}")
    return candidate


def create_dump_dir(directory: Path, argument: str = "dump_dir",
                    first_file: tuple[str, bytes] = (".write-probe", b"")) -> None:
    """Create ``directory`` and write its first file (by default a probe, removed again);
    InvalidArgument naming the directory (as ``argument``) if it cannot be written."""
    name, data = first_file
    try:
        directory.mkdir(parents=True)
        (directory / name).write_bytes(data)
        if name == ".write-probe":
            (directory / name).unlink()
    except OSError as exc:
        raise InvalidArgument(
            f"{argument} {str(directory)!r} is not writable ({exc.strerror or exc}); "
            f"pass a {argument} in a writable location") from None


def call_name(func: Any) -> str:
    """Directory name of a torch-level call: ``torch.conv2d`` -> ``conv2d``,
    ``Tensor.__add__`` -> ``add``, ``Tensor.__iadd__`` -> ``iadd``."""
    name = getattr(func, "__name__", None) or type(func).__name__
    is_dunder = len(name) > 4 and name.startswith("__") and name.endswith("__")
    return name[2:-2] if is_dunder else name


@dataclass(slots=True)
class _Frame:
    """A parent of numbered ops: the dump root, or a torch-level call."""

    name: str
    parent: "_Frame | None"
    path: str | None = None  # relative to the root, "/"-separated; None until an op runs inside
    children: int = 0


@dataclass
class OpTree:
    """Numbers ops and calls as they run; paths are relative to the dump root."""

    _stack: list[_Frame] = field(default_factory=lambda: [_Frame("", None, "")])

    def enter_call(self, name: str) -> None:
        """A torch-level call starts (its directory is made only if an aten op runs in it)."""
        self._stack.append(_Frame(name, self._stack[-1]))

    def exit_call(self) -> None:
        """The innermost torch-level call returned."""
        self._stack.pop()

    def place_op(self, name: str) -> tuple[str, str]:
        """The relative directory of an aten op about to run, and the call it runs in."""
        frame = self._stack[-1]
        if frame.parent is None:
            return self._child(frame, name), ""
        if frame.path is None:
            frame.path = self._child(frame.parent, frame.name)
            if name == frame.name:  # the call is its first op: later ops nest inside it
                return frame.path, frame.name
        return self._child(frame, name), frame.name

    @staticmethod
    def _child(frame: _Frame, name: str) -> str:
        frame.children += 1
        child = f"{frame.children}_{name}"
        return f"{frame.path}/{child}" if frame.path else child


@dataclass(frozen=True)
class Parameter:
    """One input of an op's schema, as the dump names and prints it."""

    name: str
    label: str  # the file and index name: mlu_<name>
    positional: bool
    has_default: bool
    default: Any
    fixed_size: int | None  # N of a ``bool[N]`` argument (Cambricon prints it as an Array)
    optional: bool
    written: bool  # the op writes to it (in-place)
    tensors: bool  # its type can hold tensors (Tensor, Tensor?, Tensor[], ...)


@dataclass(frozen=True)
class OpInfo:
    """What the dump needs of an aten op's schema, worked out once per op overload."""

    name: str  # directory name: the overload packet (``add``)
    qualified: str  # ``aten::add.Tensor``
    parameters: tuple[Parameter, ...]  # ``out=`` arguments are results, so left out
    writes_inputs: bool  # in-place or ``out=``: no CPU re-run, as Cambricon's dumper
    excluded: bool
    uninitialised: bool


def op_info(func: Any) -> OpInfo:
    """The dump's view of ``func`` (an ``OpOverload``), cached: schemas never change. Keyed by
    ``id``: overloads live as long as the process, and hashing one runs Python code."""
    info = _OP_INFOS.get(id(func))
    if info is None:
        info = _OP_INFOS[id(func)] = _op_info(func)
    return info


_OP_INFOS: dict[int, OpInfo] = {}


def _op_info(func: Any) -> OpInfo:
    schema = func._schema
    name = func._overloadpacket.__name__
    overload = f".{schema.overload_name}" if schema.overload_name else ""
    parameters = tuple(
        Parameter(argument.name, f"mlu_{argument.name}", not argument.kwarg_only,
                  argument.has_default_value(),
                  argument.default_value if argument.has_default_value() else None,
                  argument.N, str(argument.type).startswith("Optional["), argument.is_write,
                  "Tensor" in str(argument.type))
        for argument in schema.arguments if not argument.is_out)
    return OpInfo(name, f"{schema.name}{overload}", parameters,
                  any(argument.is_write for argument in schema.arguments),
                  name in EXCLUDED_OPS, name in UNINITIALISED_OPS)


def bind_arguments(info: OpInfo, args: tuple, kwargs: dict) -> Iterator[tuple[Parameter, Any]]:
    """The op's inputs with their values, defaults included (Cambricon dumps ``mlu_alpha``)."""
    for position, parameter in enumerate(info.parameters):
        if position < len(args) and parameter.positional:
            yield parameter, args[position]
        elif parameter.name in kwargs:
            yield parameter, kwargs[parameter.name]
        elif parameter.has_default:
            yield parameter, parameter.default
