"""Fused execution of one model: compile cache by input signature, layer-by-layer fallback."""
from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils._pytree as pytree
from torch import nn

from mluverify.device.fusion import _device
from mluverify.device.fusion.errors import CaptureError
from mluverify.device.fusion.program import Fallback, FusedProgram, GroupSummary, build_program
from mluverify.device.fusion.settings import FusionSettings, current_settings

LAYER_BY_LAYER = "layer-by-layer"
# Where a module fused in place (a torch.jit module called on the device) keeps its runtime.
RUNTIME_ATTRIBUTE = "_mlu_fusion_runtime"
NO_DEVICE_KERNEL = "no device kernel"


@dataclass(frozen=True)
class CacheStats:
    """Compile-cache counters: a miss captures and builds a program, a hit reuses one."""

    hits: int = 0
    misses: int = 0


@dataclass(frozen=True)
class FusionSummary:
    """What the last fused call ran: its groups, the ops that fell back and why, the cache."""

    groups: tuple[GroupSummary, ...]
    fallbacks: tuple[Fallback, ...]
    cache: CacheStats
    layer_by_layer_reason: str | None = None

    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.groups)


def signature(inputs: tuple) -> tuple:
    """The compile-cache key part of the inputs: shape, dtype and device of every tensor,
    the value of everything else."""
    leaves, spec = pytree.tree_flatten(inputs)
    return (str(spec),) + tuple(
        (tuple(x.shape), x.dtype, x.device.type) if isinstance(x, torch.Tensor) else repr(x) for x in leaves
    )


class FusionRuntime:
    """Runs ``model`` fused, one program per input signature and fusion settings.

    :param model: what is captured (an ``nn.Module`` or ``torch.jit`` module).
    :param layer_by_layer: runs the model op by op; used when fusion is disabled
        (``_jit_override_can_fuse_on_mlu(False)``) or the model cannot be captured.
    """

    def __init__(self, model: nn.Module, layer_by_layer: Callable) -> None:
        self.model = model
        self.layer_by_layer = layer_by_layer
        self._programs: dict[tuple, FusedProgram | CaptureError] = {}
        self._stats = CacheStats()
        self._last: FusedProgram | CaptureError | None = None
        self._layer_by_layer_calls = 0
        self._cpu_fallbacks: collections.Counter[str] = collections.Counter()

    def __call__(self, *inputs: object) -> object:
        if not _device.fusion_enabled():
            return self.layer_by_layer(*inputs)
        entry = self.program(inputs)
        if not isinstance(entry, CaptureError):
            try:
                with _device.per_op_kernels() as cpu_fallbacks:
                    outputs = entry(*inputs)
                self._cpu_fallbacks.update(cpu_fallbacks)
                return outputs
            except RuntimeError as exc:
                entry = self._demote(inputs, exc)
        self._layer_by_layer_calls += 1
        return self.layer_by_layer(*inputs)

    def _demote(self, inputs: tuple, exc: RuntimeError) -> CaptureError:
        """A captured graph whose shape assumption (a runtime assertion torch.export inserted for a
        data-dependent size, e.g. ``masked_select`` with a broadcast mask) fails on real data was
        not a faithful capture: these inputs run layer by layer from now on, with the reason."""
        if "Runtime assertion failed" not in str(exc):
            raise exc
        first_line = (str(exc).strip().splitlines() or [""])[0]
        error = CaptureError(f"captured graph of {type(self.model).__name__} does not hold for these inputs: {first_line}")
        warnings.warn(f"fusion falls back to layer-by-layer execution: {error.reason}", stacklevel=3)
        self._programs[self._key(inputs, current_settings())] = self._last = error
        return error

    def _key(self, inputs: tuple, settings: FusionSettings) -> tuple:
        return (signature(inputs), settings, _device.matmul_mantissa_bits())

    def program(self, inputs: tuple, settings: FusionSettings | None = None) -> FusedProgram | CaptureError:
        """The program for ``inputs`` (built on a cache miss), or the capture error it met."""
        settings = current_settings() if settings is None else settings
        key = self._key(inputs, settings)
        entry = self._programs.get(key)
        if entry is None:
            self._stats = CacheStats(self._stats.hits, self._stats.misses + 1)
            entry = self._programs[key] = self._build(inputs, settings)
        else:
            self._stats = CacheStats(self._stats.hits + 1, self._stats.misses)
        self._last = entry
        return entry

    def _build(self, inputs: tuple, settings: FusionSettings) -> FusedProgram | CaptureError:
        try:
            return build_program(self.model, inputs, settings)
        except CaptureError as error:
            warnings.warn(f"fusion falls back to layer-by-layer execution: {error.reason}", stacklevel=4)
            return error

    def summary(self) -> FusionSummary:
        """The last program's groups and ops left out, and every CPU fallback and
        layer-by-layer run so far."""
        last = self._last
        cpu = tuple(Fallback(op, "cpu", NO_DEVICE_KERNEL, n) for op, n in self._cpu_fallbacks.items())
        if isinstance(last, CaptureError):
            whole = Fallback(type(self.model).__name__, LAYER_BY_LAYER, last.reason, self._layer_by_layer_calls)
            return FusionSummary((), (whole,) + cpu, self._stats, last.reason)
        if last is None:
            return FusionSummary((), cpu, self._stats)
        return FusionSummary(last.group_summaries(), last.fallbacks() + cpu, self._stats)


class FusedModule(nn.Module):
    """``model`` run fused on whatever device its inputs are on (see ``fuse``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.runtime = FusionRuntime(model, model)

    def forward(self, *inputs: object) -> object:
        return self.runtime(*inputs)


def fuse(model: nn.Module, example_inputs: tuple) -> FusedModule:
    """Fuse ``model`` for ``example_inputs``, built now (when fusion is on); other input
    signatures compile on first use.

    ``model`` and the inputs must be on the same device (``mlu`` or the CPU). Fusion follows
    ``_jit_override_can_fuse_on_mlu`` at each call.
    """
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    fused = FusedModule(model)
    if _device.fusion_enabled():
        fused.runtime.program(example_inputs)
    return fused


def fusion_summary(module: nn.Module) -> FusionSummary:
    """The groups, ops and fallbacks of the last fused call of ``module`` (a ``FusedModule``,
    or a ``torch.jit`` module called on the device)."""
    # A FusedModule holds its runtime; a torch.jit module called on the device keeps its own.
    runtime = getattr(module, "runtime", None) or getattr(module, RUNTIME_ATTRIBUTE, None)
    if not isinstance(runtime, FusionRuntime):
        raise TypeError(
            f"fusion_summary needs a module returned by fuse() or a torch.jit module called on "
            f"the device, got {type(module).__name__}"
        )
    return runtime.summary()
