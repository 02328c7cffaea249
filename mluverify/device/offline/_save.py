"""Saving a fused model as an offline model (this side uses the fusion compiler)."""
from __future__ import annotations

import contextvars
import dataclasses
import io
import os
from pathlib import Path

import torch
from torch import nn

from mluverify.device.fusion.errors import CaptureError, OfflineModelError
from mluverify.device.offline._artifact import Manifest, write
from mluverify.device.offline._input_format import to_input_format, with_input_format

SUFFIX = ".cambricon"
# The seeds' ``ct.save_as_cambricon(name)``: while set, each fused program a run builds is
# also saved as ``<name>.cambricon``.
_SAVING_AS: contextvars.ContextVar[str] = contextvars.ContextVar("mlu_save_as_cambricon", default="")


def save_as_cambricon(name: str) -> None:
    """From now on, save every fused program that runs as the offline model ``<name>.cambricon``;
    ``save_as_cambricon("")`` stops (the seeds' offline flow, around a fused run)."""
    if not isinstance(name, str):
        raise OfflineModelError(f"save_as_cambricon takes a file name (str), got {name!r} (type={type(name).__name__})")
    _SAVING_AS.set(name)


def saving_as() -> Path | None:
    """Where ``save_as_cambricon`` asks the fused programs to be saved, or None."""
    name = _SAVING_AS.get()
    return Path(name if name.endswith(SUFFIX) else name + SUFFIX) if name else None


def save(model: nn.Module, example_inputs: tuple, path: str | os.PathLike, *, input_format: int = 0) -> Path:
    """Save ``model`` fused for ``example_inputs`` as an offline model at ``path``.

    The model and inputs may be on ``mlu`` or on the CPU; quantized models keep their
    quantization parameters. The program is saved with the numerics settings in force (core
    version, core number, matmul precision), which the offline model keeps wherever it runs.
    ``input_format`` (the seeds' genoff.py parameter, as ``mlu_model.set_input_format`` takes
    it): 1 RGBA / 2 ARGB save a model whose first input, RGB images ``(N, 3, H, W)`` in
    ``example_inputs``, becomes four-channel images in that order, its first convolution
    padded for the alpha channel (``with_input_format``); 0 RGB takes the inputs as given.

    :raises OfflineModelError: when the model cannot be captured or does not fuse whole (an
        offline model holds fusion groups only, as a CNML offline model holds no framework op),
        naming the ops left out; or when ``path`` cannot be written. An existing file at
        ``path`` is kept in every such case.
    """
    from mluverify._version import __version__
    from mluverify.device import numerics
    from mluverify.device.fusion import _device
    from mluverify.device.fusion.capture import capture_program, model_name

    path = Path(path)
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if input_format:
        model = with_input_format(model, inputs[0] if inputs else None, input_format)
        inputs = (to_input_format(inputs[0], input_format), *inputs[1:])
    example = tuple(_device.as_cpu(x) if isinstance(x, torch.Tensor) else x for x in inputs)
    try:
        with torch.no_grad():
            program = capture_program(model, example, _device.as_cpu)
    except CaptureError as error:
        raise OfflineModelError(f"cannot save {path}: {error.reason}") from None
    serialized = io.BytesIO()
    torch.export.save(program, serialized)
    groups, ops = _fusion_groups(serialized.getvalue(), path)
    manifest = Manifest(model=model_name(model), mluverify_version=__version__, torch_version=torch.__version__,
                        numerics=dataclasses.asdict(numerics.active_settings()), groups=groups, ops=ops,
                        input_format=input_format)
    return write(path, manifest, serialized.getvalue())


def _fusion_groups(program: bytes, path: Path) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
    """Partition the program *as it will be read back* (so the recorded node indices are those
    a loader sees) and return each group's op indices and every op's name."""
    from mluverify.device.fusion.partition import partition
    from mluverify.device.fusion.settings import current_settings, op_name
    from mluverify.device.offline._load import call_nodes, program_graph

    graph_module = program_graph(torch.export.load(io.BytesIO(program)))
    ops = call_nodes(graph_module)
    for index, node in enumerate(ops):
        node.meta["mlu_offline_index"] = index
    names = [str(op_name(node.target)) for node in ops]
    group_names, outside = partition(graph_module, current_settings())
    if outside:
        left_out = ", ".join(f"{o.op} ({o.reason})" for o in outside)
        raise OfflineModelError(f"cannot save {path}: an offline model holds fusion groups only, "
                                f"and these ops do not fuse: {left_out}")
    groups = tuple(
        tuple(n.meta["mlu_offline_index"] for n in call_nodes(graph_module.get_submodule(name)))
        for name in group_names
    )
    return groups, tuple(names)
