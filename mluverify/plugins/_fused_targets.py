"""The emulator's ``mlu:cnml`` and ``mlu:offline`` runners for the ``mlu`` back end
(``mlu_backend``): a case's callable fused on the device (and saved and loaded back as an
offline model), quantized when the case asks.

Glue between a case and the device's public API (``fuse``, ``offline``, ``quantize_for_target``),
so it lives with the back end, not in the device. Importing it registers the emulated device:
``mlu_backend`` imports it only where the emulator runs.
"""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from mluverify.core.backends import GroupOutputs, map_tensors, move_module
from mluverify.core.case import Case
from mluverify.device.fusion import FusionSummary, fuse
from mluverify.device.fusion.debug import GroupRun, recording_group_runs
from mluverify.device.fusion.runtime import FUSED
from mluverify.errors import Unsupported
from mluverify.plugins._bound_call import BoundCall


def _float32(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.is_floating_point() else t


def prepared(fn: Callable, args: tuple, kwargs: dict, case: Case) -> nn.Module:
    """A CPU module computing ``fn(*args, **kwargs)``: quantized (calibrated on ``args`` in
    float32) when ``case.quant`` names a quantization (``Unsupported`` when ``fn`` has no layer
    to quantize), floating weights in ``case.dtype``."""
    module = BoundCall(copy.deepcopy(fn) if isinstance(fn, nn.Module) else fn, kwargs)
    if case.quant:
        from mluverify.device.quantization import default_mapping, quantize_for_target
        from mluverify.dump import undumped

        with undumped():  # the host's preparation (layers built on meta, calibration on the CPU), no device work
            module = quantize_for_target(module, [map_tensors(_float32, args)], dtype=case.quant)
        quantized = tuple(default_mapping().values())
        if not any(isinstance(layer, quantized) for layer in module.modules()):  # it would run in float
            raise Unsupported(f"case {case.case_id}: {case.target} quantizes the layers of a module "
                              f"(nn.Linear, nn.Conv1d/2d/3d and those of the mluverify_quant_mapping hook); "
                              f"{module.display_name} has none, so quant={case.quant!r} would quantize nothing")
    dtype = getattr(torch, case.dtype, None)
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        module = module.to(dtype)
    return module.eval()


def run_fused(fn: Callable, args: tuple, kwargs: dict, case: Case) -> tuple[Any, FusionSummary, tuple[GroupOutputs, ...]]:
    """Run ``fn`` on ``mlu`` fused (``fuse``), as the ``cnml`` mode of the ``mlu`` back end;
    return the output, how the call ran and what each fusion group computed beside its own
    graph on the CPU (``FUSED_KERNEL_DEBUG=cpu``'s pair, kept in memory), with the value inside
    each group furthest from that graph. A call fused whole into one group hands over only the
    inner value: that group's outputs are the call's, judged already."""
    inputs = map_tensors(_to_mlu, args)
    with torch.no_grad():
        fused = fuse(move_module(prepared(fn, args, kwargs, case), "mlu"), inputs)  # tied parameters stay tied
        built = fused.runtime.summary()  # the program fuse() built for these inputs
        whole = built.executed_as == FUSED and len(built.groups) == 1
        with recording_group_runs(outputs=not whole) as runs:
            output = fused(*inputs)
    return output, fused.runtime.summary(), tuple(pair for run in runs for pair in _group_pairs(run, whole))


def _group_pairs(run: GroupRun, whole: bool) -> tuple[GroupOutputs, ...]:
    """What one group call hands over to be judged: its outputs (unless the call was fused whole:
    they are the call's) and the value inside it furthest from its graph on the CPU."""
    outputs = () if whole else (GroupOutputs(run.group, run.ops, run.fused, run.reference, run.unjudged),)
    if run.inner_unjudged:
        return (*outputs, GroupOutputs(run.group, (), (), (), run.inner_unjudged, inside="inner values"))
    if run.inner is None:
        return outputs
    inner = run.inner
    return (*outputs, GroupOutputs(run.group, (inner.op,), (inner.fused,), (inner.reference,), inside=inner.node))


def run_offline(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Any:
    """Save ``fn`` on ``mlu`` as an offline model (``mluverify.device.offline``), load it back
    and run it, as the ``offline`` mode of the ``mlu`` back end."""
    from mluverify.device import offline

    inputs = map_tensors(_to_mlu, args)
    with torch.no_grad(), tempfile.TemporaryDirectory(prefix="mlu-offline-") as directory:
        path = offline.save(prepared(fn, args, kwargs, case).to("mlu"), inputs, Path(directory) / "case.cambricon")
        return offline.load(path)(*inputs)


def _to_mlu(t: torch.Tensor) -> torch.Tensor:
    return t.to("mlu")
