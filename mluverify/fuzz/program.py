"""Programs as data: a DAG of ops over 1-3 inputs, its JSON form and the Python it stands for.

Values are named ``x0..x2`` (inputs, float32) and ``v0..`` (one per node, in order). A node
reads earlier values only, so the node list is a topological order. The program returns every
node value no later node reads (its sinks), so no op is dead code.

The JSON form is versioned (``FORMAT``, ``VERSION``). Version 1 programs are read with the ops
whose domain version 2 widened renamed to their version-1 forms (``ops.LEGACY_V1``), so they
compute what they did; reading another version, or something that is not a program, is an
InvalidArgument naming what is wrong.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from mluverify.errors import InvalidArgument
from mluverify.fuzz.ops import LEGACY_V1, spec

FORMAT = "mluverify-fuzz-program"
VERSION = 2
FUNCTION_NAME = "program"


@dataclass(frozen=True)
class Node:
    """One op applied to earlier values (``args``: value names) with its parameters."""

    op: str
    args: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    def expression(self, *, golden: bool = False) -> str:
        return spec(self.op).expression(self.args, self.params, golden=golden)


@dataclass(frozen=True)
class Program:
    """Input shapes (float32 tensors) and nodes; ``outputs`` are the sinks."""

    inputs: tuple[tuple[int, ...], ...]
    nodes: tuple[Node, ...]

    @property
    def ops(self) -> tuple[str, ...]:
        """The op sequence: what a finding's signature and its minimality are measured on."""
        return tuple(node.op for node in self.nodes)

    @property
    def outputs(self) -> tuple[str, ...]:
        read = {arg for node in self.nodes for arg in node.args}
        return tuple(f"v{i}" for i in range(len(self.nodes)) if f"v{i}" not in read)

    def source(self, *, every_value: bool = False, golden: bool = False) -> str:
        """``def program(x0, ...)``: the program as Python over torch (``every_value``: return
        every node value, for the finiteness check; ``golden``: as the float64 run computes it,
        see ``OpSpec.golden_template``)."""
        params = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        body = [f"    v{i} = {node.expression(golden=golden)}" for i, node in enumerate(self.nodes)]
        returned = [f"v{i}" for i in range(len(self.nodes))] if every_value else self.outputs
        return "\n".join([f"def {FUNCTION_NAME}({params}):", *body, f"    return ({', '.join(returned)},)"])

    def callable(self, *, every_value: bool = False, golden: bool = False) -> Callable[..., tuple]:
        """The program as a Python function (compiled from ``source``, cached)."""
        return _compile(self.source(every_value=every_value, golden=golden))

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "inputs": [list(shape) for shape in self.inputs],
                "nodes": [{"op": n.op, "args": list(n.args), "params": dict(n.params)} for n in self.nodes]}

    @classmethod
    def from_json(cls, data: Any, where: str = "program") -> "Program":
        """Read the JSON form; InvalidArgument names ``where`` and what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidArgument(f"{where}: not a fuzz program (no \"format\": {FORMAT!r})")
        version = data.get("version")
        if version not in (1, VERSION):
            raise InvalidArgument(f"{where}: fuzz program format version {version!r}; this "
                                  f"mluverify reads versions 1 and {VERSION}")
        renames = {name: op.name for name, op in LEGACY_V1.items()} if version == 1 else {}
        try:
            inputs = tuple(tuple(int(side) for side in shape) for shape in data["inputs"])
            nodes = tuple(Node(renames.get(n["op"], n["op"]), tuple(n["args"]), dict(n["params"]))
                          for n in data["nodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"{where}: malformed fuzz program ({type(exc).__name__}: {exc})") from None
        program = cls(inputs, nodes)
        program.check(where)
        return program

    def check(self, where: str = "program") -> None:
        """Every op known, every argument an earlier value; else InvalidArgument."""
        known = {f"x{i}" for i in range(len(self.inputs))}
        for index, node in enumerate(self.nodes):
            spec(node.op)
            unknown = [arg for arg in node.args if arg not in known]
            if unknown:
                raise InvalidArgument(f"{where}: node v{index} ({node.op}) reads {unknown[0]!r}, which is "
                                      f"not an input or an earlier node")
            known.add(f"v{index}")


@functools.lru_cache(maxsize=256)
def _compile(source: str) -> Callable[..., tuple]:
    import torch

    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(source, f"<fuzz {FUNCTION_NAME}>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace[FUNCTION_NAME]


def run(program: Program, inputs: Sequence[Any], *, every_value: bool = False, golden: bool = False) -> tuple:
    """The program on fresh copies of ``inputs`` (in-place ops never touch the caller's);
    ``golden``: in float64, floats made from integers included (``clamp(int, 0.0, 1.0)`` takes
    the default dtype, float64 there), so no float32 value meets a float64 one."""
    import torch

    fn = program.callable(every_value=every_value, golden=golden)
    if not golden:
        return fn(*(x.clone() for x in inputs))
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return fn(*(x.double() for x in inputs))
    finally:
        torch.set_default_dtype(default)


__all__ = ["FORMAT", "Node", "Program", "VERSION", "run"]
