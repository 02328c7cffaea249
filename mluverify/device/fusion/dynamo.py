"""``torch.compile(model, backend="mlu")``: each graph dynamo captures runs fused.

Dynamo hands the module's parameters and buffers to its graph as inputs; they are bound as
constants of the captured graph on the first call (so they fold and pre-round like weights of
a traced model). Like an inference engine built from a model, a compiled graph therefore reads
the weights once: recompile after changing them.
"""
from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Callable, Sequence

import torch
from torch import fx, nn

if TYPE_CHECKING:
    from mluverify.device.fusion.runtime import FusionRuntime

BACKEND_NAME = "mlu"
# The runtimes of live compiled graphs, for ``compiled_summaries()``.
_COMPILED: "weakref.WeakSet[FusionRuntime]" = weakref.WeakSet()


class _BoundState(nn.Module):
    """Dynamo's graph with its module-state inputs held as buffers; takes the user inputs only."""

    def __init__(self, graph_module: fx.GraphModule, state: dict[int, torch.Tensor], arity: int) -> None:
        super().__init__()
        self.graph_module = graph_module
        self.positions = tuple(sorted(state))
        self.arity = arity
        for i in self.positions:
            self.register_buffer(f"state{i}", state[i].detach())

    def forward(self, *user_inputs: object) -> object:
        args, supplied = [], iter(user_inputs)
        for i in range(self.arity):
            args.append(getattr(self, f"state{i}") if i in self.positions else next(supplied))
        return self.graph_module(*args)


def _state_positions(graph_module: fx.GraphModule) -> tuple[int, ...]:
    """Positions of the inputs dynamo took from the module itself (``L['self']...``)."""
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    return tuple(
        i for i, node in enumerate(placeholders)
        if (arg := node.meta.get("grapharg")) is not None and arg.source.name.startswith("L['self']")
    )


def mlu_compiler(graph_module: fx.GraphModule, example_inputs: Sequence[torch.Tensor]) -> Callable:
    """The dynamo backend: fuse ``graph_module`` lazily, on its first call with real tensors
    (the compiler itself runs under fake tensors)."""
    positions = _state_positions(graph_module)
    arity = len(example_inputs)
    runtime: list[FusionRuntime] = []

    def run(*args: object) -> object:
        if not runtime:
            from mluverify.device.fusion.runtime import FusionRuntime  # the compiler, on first call

            state = {i: args[i] for i in positions}
            bound = _BoundState(graph_module, state, arity)
            runtime.append(FusionRuntime(bound, bound))
            _COMPILED.add(runtime[0])
        return runtime[0](*(a for i, a in enumerate(args) if i not in positions))

    return run


def compiled_summaries() -> list:
    """``FusionSummary`` of every live graph compiled with ``backend="mlu"`` and run."""
    return [runtime.summary() for runtime in _COMPILED]


def register() -> None:
    """Register the backend name ``mlu`` with ``torch._dynamo`` (once).

    Importing ``torch._dynamo`` takes seconds, so ``import mluverify.device`` registers the
    backend only when dynamo is already loaded; otherwise dynamo finds it through the entry
    point ``torch_dynamo_backends: mlu`` when ``torch.compile(backend="mlu")`` asks for it.
    """
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if BACKEND_NAME not in _BACKENDS:
        register_backend(mlu_compiler, name=BACKEND_NAME)


def register_if_loaded() -> None:
    if "torch._dynamo" in sys.modules:
        register()
