"""Graph reduction after hypothesis's shrinking: remove nodes its choice sequence cannot.

Hypothesis shrinks the draws that made a program; deleting a node in the middle re-reads the
draws after it (other operands, other shapes), so a graph can stay larger than it must. These
passes edit the program itself, keeping a candidate only when the target still fails the same
way (``still_fails``):

- drop a sink node (an output no other node reads);
- cut at a node: the node becomes a new program input holding its CPU value (float32 values),
  and the ops only it read go with it, as do the inputs then unread (at most ``MAX_INPUTS``
  remain);
- drop an input no node reads.

Every candidate is checked before it is judged: no in-place op may write into an input (a cut
could make one), and it must run on the CPU with every value defined (``generate.all_defined``).
``max_runs`` bounds the judgements.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from mluverify.fuzz.generate import MAX_INPUTS, all_defined
from mluverify.fuzz.ops import spec
from mluverify.fuzz.program import Node, Program, run

Candidate = tuple[Program, list]


def _renamed(arg: str, renames: dict[str, str]) -> str:
    return renames.get(arg, arg)


def without_node(program: Program, index: int, replacement: str | None = None) -> Program:
    """``program`` less node ``index``; its readers read ``replacement`` instead."""
    renames = {f"v{j}": f"v{j - 1}" for j in range(index + 1, len(program.nodes))}
    if replacement is not None:
        renames[f"v{index}"] = replacement
    nodes = tuple(Node(node.op, tuple(_renamed(a, renames) for a in node.args), node.params)
                  for j, node in enumerate(program.nodes) if j != index)
    return Program(program.inputs, nodes)


def without_input(program: Program, inputs: Sequence[Any], index: int) -> Candidate:
    renames = {f"x{j}": f"x{j - 1}" for j in range(index + 1, len(program.inputs))}
    nodes = tuple(Node(n.op, tuple(_renamed(a, renames) for a in n.args), n.params) for n in program.nodes)
    shapes = tuple(s for j, s in enumerate(program.inputs) if j != index)
    return Program(shapes, nodes), [x for j, x in enumerate(inputs) if j != index]


def _candidates(program: Program, inputs: list) -> Iterator[Candidate]:
    read = {arg for node in program.nodes for arg in node.args}
    for index in reversed(range(len(program.nodes))):
        if f"v{index}" not in read and len(program.nodes) > 1:
            yield without_node(program, index), inputs
    values = run(program, inputs, every_value=True)
    for index in range(len(program.nodes)):
        value = values[index]
        if value.dtype == inputs[0].dtype and f"v{index}" in read:
            cut = _cut(program, inputs, index, value)
            if len(cut[0].inputs) <= MAX_INPUTS:
                yield cut
    for index in range(len(program.inputs)):
        if f"x{index}" not in read and len(program.inputs) > 1:
            yield without_input(program, inputs, index)


def _cut(program: Program, inputs: list, index: int, value: Any) -> Candidate:
    """Node ``index`` becomes a new input holding ``value`` (its CPU value); the nodes only it
    read go with it (they would be new outputs otherwise), and so do the inputs then unread,
    so that a program already at ``MAX_INPUTS`` can be cut too."""
    original_sinks = {int(name[1:]) for name in program.outputs}
    cut = without_node(program, index, f"x{len(program.inputs)}")
    current: Candidate = (Program((*cut.inputs, tuple(value.shape)), cut.nodes), [*inputs, value.clone().contiguous()])
    origin = [j for j in range(len(program.nodes)) if j != index]  # each node's index in ``program``
    while True:
        sinks = [int(name[1:]) for name in current[0].outputs]
        orphan = next((j for j in reversed(sinks) if origin[j] not in original_sinks), None)
        if orphan is None:
            break
        current = (without_node(current[0], orphan), current[1])
        del origin[orphan]
    read = {arg for node in current[0].nodes for arg in node.args}
    for unread in reversed([i for i in range(len(current[0].inputs)) if f"x{i}" not in read]):
        current = without_input(*current, unread)
    return current


def writes_into_input(program: Program) -> bool:
    """An in-place op writes into a program input (or a view of one): what generation never
    draws, and what a cut could make."""
    root = {f"x{i}": f"x{i}" for i in range(len(program.inputs))}
    for index, node in enumerate(program.nodes):
        op = spec(node.op)
        if op.inplace and root[node.args[0]].startswith("x"):
            return True
        root[f"v{index}"] = root[node.args[0]] if op.aliases else f"v{index}"
    return False


def _valid(program: Program, inputs: list) -> bool:
    if writes_into_input(program):
        return False
    try:
        return all_defined(program, inputs)
    except Exception:  # an edit torch rejects: not a program
        return False


def reduce_program(program: Program, inputs: Sequence[Any], still_fails: Callable[[Program, list], bool],
                   max_runs: int = 100) -> Candidate:
    """The smallest program (and inputs) the passes reach on which ``still_fails`` holds."""
    current: Candidate = (program, list(inputs))
    runs = 0
    improved = True
    while improved and runs < max_runs:
        improved = False
        for candidate in _candidates(*current):
            if runs >= max_runs:
                break
            if not _valid(*candidate):
                continue
            runs += 1
            if still_fails(*candidate):
                current, improved = candidate, True
                break
    return current


__all__ = ["reduce_program", "without_input", "without_node"]
