"""The graph fusion runs for a captured program (``torch.export.ExportedProgram``).

Kept apart from ``capture`` (which traces models) so that an offline model, a program loaded
from disk, becomes the same graph without loading the tracer.
"""
from __future__ import annotations

import torch
from torch import fx


def graph_module_of(program: torch.export.ExportedProgram) -> fx.GraphModule:
    """``program.module()`` without its input guards, with ``reshape`` kept as ``reshape``."""
    graph_module = program.module()
    _drop_guards(graph_module)
    views_as_reshapes(graph_module)
    return graph_module


# Views whose validity depends on the strides of their input.
_STRIDE_DEPENDENT_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


def views_as_reshapes(graph_module: fx.GraphModule) -> None:
    """Turn ``view`` back into ``reshape``.

    Decomposition turns ``reshape`` into ``view`` wherever the *example's* strides allow it, but
    an op may lay out its output differently at run time than during capture (CPU
    ``scaled_dot_product_attention`` returns a transposed layout, the device kernel a contiguous
    one), and the view then fails. ``reshape`` is a view where the strides allow it and a copy
    elsewhere; in a functional graph the two compute the same values.
    """
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in _STRIDE_DEPENDENT_VIEWS:
            node.target = torch.ops.aten.reshape.default
    graph_module.recompile()


def _drop_guards(graph_module: fx.GraphModule) -> None:
    """Remove the ``_guards_fn`` input checks of ``ep.module()``: the fused module's compile
    cache is keyed by input shapes and dtypes, which is what those guards check."""
    for node in list(graph_module.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn":
            graph_module.graph.erase_node(node)
    if hasattr(graph_module, "_guards_fn"):
        graph_module.delete_submodule("_guards_fn")
    graph_module.recompile()
