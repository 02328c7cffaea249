"""Loading and running an offline model, without the fusion compiler.

The program is read back with ``torch.export.load``; the ops the manifest lists are cut out as
``MLUFusionGroup{i}`` (``fuse_by_partitions``, the graph surgery the partitioner itself ends
with, but no decision: the groups are the saved ones) and each is built by the fusion groups'
own builder, so an offline model computes what ``mlu:cnml`` computes, bit for bit.
"""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import torch
import torch.utils._pytree as pytree
from torch import fx, nn
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from mluverify.device.fusion.errors import OfflineModelError
from mluverify.device.fusion.exported import graph_module_of
from mluverify.device.offline._artifact import Manifest, corrupted, read

GROUP_PREFIX = "MLUFusionGroup"


def program_graph(program: torch.export.ExportedProgram) -> fx.GraphModule:
    """The graph an offline model's groups are cut from (as fused execution sees a capture)."""
    return graph_module_of(program)


def call_nodes(graph_module: fx.GraphModule) -> list[fx.Node]:
    """The op nodes of a graph, in graph order: what the manifest's group indices count."""
    return [node for node in graph_module.graph.nodes if node.op == "call_function"]


class OfflineModel(nn.Module):
    """An offline model read from ``path``: its fusion groups, run under the numerics settings
    it was saved with, on ``mlu`` inputs (or CPU inputs) of the shapes it was built for."""

    def __init__(self, path: Path, manifest: Manifest, program: fx.GraphModule,
                 inputs: list[torch.Tensor | None]) -> None:
        super().__init__()
        self.path = path
        self.manifest = manifest
        self.program = program
        self._inputs = inputs  # the example input of each placeholder (None: not a tensor)

    def forward(self, *inputs: object) -> object:
        self._check(inputs)
        with _numerics(self.manifest):
            return self.program(*inputs)

    def _check(self, inputs: tuple) -> None:
        given = pytree.tree_leaves(inputs)
        if len(given) != len(self._inputs) or not all(map(_fits, given, self._inputs)):
            expected = [_describe(x) for x in self._inputs]
            got = [_describe(x) if isinstance(x, torch.Tensor) else repr(x) for x in given]
            raise OfflineModelError(f"offline model {str(self.path)!r} was built for inputs {expected}, got {got}")

    def extra_repr(self) -> str:
        m = self.manifest
        return f"path={str(self.path)!r}, model={m.model}, numerics={m.numerics}, groups={len(m.groups)}"


def _fits(value: object, example: torch.Tensor | None) -> bool:
    """Whether ``value`` is an input like ``example`` (same dtype and rank; same size in every
    dimension the program did not capture as symbolic)."""
    if example is None:
        return not isinstance(value, torch.Tensor)
    return (isinstance(value, torch.Tensor) and value.dtype == example.dtype and value.dim() == example.dim()
            and all(not isinstance(e, int) or e == v for e, v in zip(example.shape, value.shape)))


def _describe(tensor: torch.Tensor | None) -> str | None:
    if tensor is None:
        return None
    return f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}"


def _numerics(manifest: Manifest) -> contextlib.AbstractContextManager:
    """The numerics settings the model was saved with, restored afterwards."""
    from mluverify.device import numerics

    return numerics.numerics_settings(**manifest.numerics)


def load(path: str | os.PathLike) -> OfflineModel:
    """Read the offline model at ``path`` (see ``save``).

    :raises OfflineModelError: naming the file, when it is missing, corrupted, or saved by
        another mluverify version (naming both).
    """
    import mluverify.device  # noqa: F401  (the device, its kernels and the quantized ops)
    from mluverify._version import __version__

    path = Path(path)
    manifest, blob = read(path, __version__)
    try:
        program = program_graph(torch.export.load(io.BytesIO(blob)))
    except Exception as exc:  # noqa: BLE001 - whatever torch.export cannot read is a broken file
        raise corrupted(path, f"{type(exc).__name__}: {exc}", f"mluverify {manifest.mluverify_version}", __version__) from None
    inputs = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"]
    inputs = [x if isinstance(x, torch.Tensor) else None for x in inputs]
    with _numerics(manifest):
        _build_groups(program, manifest, path, __version__)
    return OfflineModel(path, manifest, program, inputs)


def _build_groups(program: fx.GraphModule, manifest: Manifest, path: Path, version: str) -> None:
    from mluverify.device.fusion.group import build_group
    from mluverify.device.fusion.settings import op_name

    ops = call_nodes(program)
    if [str(op_name(node.target)) for node in ops] != list(manifest.ops):
        raise corrupted(path, "its program does not hold the ops its manifest lists",
                        f"mluverify {manifest.mluverify_version}", version)
    fuse_by_partitions(program, [dict.fromkeys(ops[i] for i in group) for group in manifest.groups],
                       prefix=GROUP_PREFIX)
    for node in list(program.graph.nodes):
        if node.op == "call_module" and str(node.target).startswith(GROUP_PREFIX):
            build_group(program, node)
    program.graph.eliminate_dead_code()
    program.delete_all_unused_submodules()
    program.recompile()
