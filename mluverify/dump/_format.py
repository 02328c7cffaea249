"""Cambricon's dump text format: one header line per value, then one number a line.

A file holds one argument (``mlu_<name>``) or one result (``cnnl_result`` / ``cpu_result``):

    Tensor : Type = Float : Shape = [2, 3] : Stride = [3, 1] : Dumped = 6
    Tensor : Type = Empty                  (a tensor with no elements)
    Scalar : Type = Long                   (then the value)
    List : Size = N / Array : Size = N     (then N values)
    TensorList : Size = N / Tuple : Size = N   (then N blocks)
    Optional : None / Optional :           (then the value's block)
    ScalarType : , Device : , String : ... (then the value)

Numbers are printed as C++ ``std::ostream <<`` prints them by default (6 significant
digits, ``%g``); integers and booleans as integers. Rendering is pure: nodes in, ASCII bytes out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence, Union

import numpy as np

# Values formatted per `%` call: large enough to amortise the call, small enough that the
# argument tuple stays in cache (measured: 64 Ki values is within 5 % of the best).
_CHUNK = 1 << 16


class TensorBlock(NamedTuple):
    """What a tensor's block prints: its header fields and the numbers written below it (a
    named tuple: one is made for every tensor a dump summarizes, a frozen dataclass costs more)."""

    type_name: str  # C++ ScalarType name ("Float", "Long", ...)
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    numel: int
    values: np.ndarray  # the numbers printed: first 10, [sum of abs], or all


@dataclass(frozen=True)
class ScalarNode:
    type_name: str  # "Long", "Double" or "Bool"
    value: Union[int, float, bool]


@dataclass(frozen=True)
class NumbersNode:
    kind: str  # "List" (int[], float[]) or "Array" (fixed-size bool[N])
    values: Sequence[Union[int, float, bool]]


@dataclass(frozen=True)
class SequenceNode:
    kind: str  # "TensorList" or "Tuple"
    items: tuple["Node", ...]


@dataclass(frozen=True)
class OptionalNode:
    value: "Node | None"


@dataclass(frozen=True)
class OtherNode:
    kind: str  # "ScalarType", "Device", "Layout", "MemoryFormat", "String", "Generator"
    text: str


Node = Union[TensorBlock, ScalarNode, NumbersNode, SequenceNode, OptionalNode, OtherNode]


def format_numbers(values: np.ndarray) -> Iterator[bytes]:
    """``values`` one a line, as C++ ``ostream <<`` would print them, in chunks of text."""
    flat = values.reshape(-1)
    line = b"%g\n" if flat.dtype.kind in "fc" else b"%d\n"
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start:start + _CHUNK].tolist()
        # One `%` over a repeated format is the fastest pure-Python way to get C's %g (shared
        # notes "dumper-costs"); on bytes it is another 1.5x faster than on str (measured).
        yield (line * len(chunk)) % tuple(chunk)


def tensor_header(block: TensorBlock) -> bytes:
    """The header line of a tensor block, ``Dumped`` being how many numbers follow."""
    if block.numel == 0:
        return b"Tensor : Type = Empty\n"
    return (f"Tensor : Type = {block.type_name} : Shape = {_dims(block.shape)} : "
            f"Stride = {_dims(block.stride)} : Dumped = {block.values.size}\n").encode()


def render(node: Node) -> Iterator[bytes]:
    """The text of one node (a whole file's content for a top-level node)."""
    if isinstance(node, TensorBlock):
        yield tensor_header(node)
        if node.numel:
            yield from format_numbers(node.values)
    elif isinstance(node, ScalarNode):
        yield f"Scalar : Type = {node.type_name}\n".encode()
        yield from format_numbers(np.asarray([node.value]))
    elif isinstance(node, NumbersNode):
        yield f"{node.kind} : Size = {len(node.values)}\n".encode()
        yield from format_numbers(np.asarray(node.values))
    elif isinstance(node, SequenceNode):
        yield f"{node.kind} : Size = {len(node.items)}\n".encode()
        for item in node.items:
            yield from render(item)
    elif isinstance(node, OptionalNode):
        if node.value is None:
            yield b"Optional : None\n"
        else:
            yield b"Optional : \n"
            yield from render(node.value)
    else:
        yield f"{node.kind} : \n{node.text}\n".encode()


def _dims(sizes: Sequence[int]) -> str:
    return "[" + ", ".join(str(size) for size in sizes) + "]"
