"""Fused execution of one model: compile cache by input signature, layer-by-layer fallback.

Fused execution never fails where layer-by-layer execution works: a model that cannot be
captured, a program that cannot be built and a program that raises at run time all run layer
by layer instead, for that input signature from then on, with the reason kept in the summary.
"""
from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils._pytree as pytree
from torch import nn

from mluverify.device.fusion import _device
from mluverify.device.fusion.calls import note_call
from mluverify.device.fusion.capture import model_name
from mluverify.device.fusion.errors import CaptureError
from mluverify.device.fusion.program import Fallback, FusedProgram, GroupSummary, build_program
from mluverify.device.fusion.settings import FusionSettings, current_settings
from mluverify.errors import MluverifyError

# How a call ran (the values of ``Execution.executed_as`` a fused mode can give).
FUSED, PARTIALLY_FUSED, LAYER_BY_LAYER = "fused", "partially fused", "layer-by-layer"
NO_DEVICE_KERNEL = "no device kernel"
FUSION_DISABLED = "fusion is disabled (_jit_override_can_fuse_on_mlu(False))"


@dataclass(frozen=True)
class CacheStats:
    """Compile-cache counters: a miss captures and builds a program, a hit reuses one."""

    hits: int = 0
    misses: int = 0


@dataclass(frozen=True)
class NotFused:
    """Why calls with one input signature run layer by layer (one line)."""

    reason: str


@dataclass(frozen=True)
class FusionSummary:
    """What the last fused call ran: its groups, the ops that fell back and why, the cache.

    ``executed_as``: ``fused`` (every op in a fusion group), ``partially fused`` (ops ran op by
    op between the groups) or ``layer-by-layer`` (the whole call ran op by op);
    ``not_fused_reason`` says why it was not ``fused``. ``demotions``: programs that raised at
    run time and were replaced by layer-by-layer execution.
    """

    groups: tuple[GroupSummary, ...]
    fallbacks: tuple[Fallback, ...]
    cache: CacheStats
    layer_by_layer_reason: str | None = None
    executed_as: str = FUSED
    not_fused_reason: str = ""
    demotions: int = 0

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


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def program_provenance(program: FusedProgram) -> tuple[str, str]:
    """``(executed_as, not_fused_reason)`` of a call of ``program``."""
    outside = program.fallbacks()
    if not outside:
        return FUSED, ""
    ops = ", ".join(f"{f.op} ({f.reason})" for f in outside)
    if not program.groups:
        return LAYER_BY_LAYER, f"no op of the captured graph joined a fusion group: {ops}"
    return PARTIALLY_FUSED, f"ran op by op between the fusion groups: {ops}"


class FusionRuntime:
    """Runs ``model`` fused, one program per input signature and fusion settings.

    :param model: what is captured (an ``nn.Module`` or ``torch.jit`` module).
    :param layer_by_layer: runs the model op by op; used when fusion is disabled
        (``_jit_override_can_fuse_on_mlu(False)``), the model cannot be captured or built, or
        its program failed at run time.
    """

    def __init__(self, model: nn.Module, layer_by_layer: Callable) -> None:
        self.model = model
        self.layer_by_layer = layer_by_layer
        self._programs: dict[tuple, FusedProgram | NotFused] = {}
        self._stats = CacheStats()
        self._last: FusedProgram | NotFused | None = None
        self._layer_by_layer_calls = 0
        self._demotions = 0
        self._cpu_fallbacks: collections.Counter[str] = collections.Counter()
        self._saved_offline: set[tuple] = set()

    def __call__(self, *inputs: object) -> object:
        outputs = self._run(inputs)
        note_call(self.summary)  # track_fused_calls(): how this call ran
        return outputs

    def _run(self, inputs: tuple) -> object:
        entry = self._entry(inputs)
        if isinstance(entry, FusedProgram):
            try:
                with _device.per_op_kernels() as cpu_fallbacks:
                    outputs = entry(*inputs)
            except MluverifyError:
                raise  # raised on purpose (e.g. an unwritable debug directory): the user's to see
            except Exception as exc:  # noqa: BLE001 - any other failure runs layer by layer
                entry = self._demote(inputs, exc)
            else:
                self._cpu_fallbacks.update(cpu_fallbacks)
                self._save_offline(inputs)
                return outputs
        self._last = entry
        self._layer_by_layer_calls += 1
        return self.layer_by_layer(*inputs)

    def _entry(self, inputs: tuple) -> FusedProgram | NotFused:
        """The program for ``inputs``, or why the call runs layer by layer (fusion switched off
        by ``_jit_override_can_fuse_on_mlu(False)`` or ``DISABLE_MLU_FUSION=1``, or a program
        that could not be had)."""
        if not _device.fusion_enabled():
            return NotFused(FUSION_DISABLED)
        settings = current_settings()
        disabled = settings.disabled_reason()
        return NotFused(disabled) if disabled else self.program(inputs, settings)

    def _save_offline(self, inputs: tuple) -> None:
        """Under ``ct.save_as_cambricon(name)``, save the program just run as the offline model
        ``name.cambricon`` (once per name and input signature)."""
        from mluverify.device.offline import save, saving_as

        path = saving_as()
        key = (path, signature(inputs))
        if path is not None and key not in self._saved_offline:
            save(self.model, inputs, path)
            self._saved_offline.add(key)

    def _demote(self, inputs: tuple, exc: Exception) -> NotFused:
        """A program that fails on real inputs (a runtime assertion torch.export inserted for a
        data-dependent size, an op whose layout differs from the captured one, a fused-numerics
        pass meeting an unforeseen input, ...) was not a faithful capture: these inputs run layer
        by layer from now on, with the reason; the demotion is counted."""
        entry = NotFused(f"fused program of {model_name(self.model)} failed for these inputs: {_first_line(exc)}")
        warnings.warn(f"fusion falls back to layer-by-layer execution: {entry.reason}", stacklevel=3)
        self._programs[self._key(inputs, current_settings())] = entry
        self._demotions += 1
        return entry

    def _key(self, inputs: tuple, settings: FusionSettings) -> tuple:
        return (signature(inputs), settings, _device.matmul_mantissa_bits())

    def program(self, inputs: tuple, settings: FusionSettings | None = None) -> FusedProgram | NotFused:
        """The program for ``inputs`` (built on a cache miss), or why there is none."""
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

    def _build(self, inputs: tuple, settings: FusionSettings) -> FusedProgram | NotFused:
        try:
            return build_program(self.model, inputs, settings)
        except CaptureError as error:
            entry = NotFused(error.reason)
        except MluverifyError:
            raise  # a setting the user must fix (e.g. FUSED_KERNEL_DEBUG_DIR)
        except Exception as exc:  # noqa: BLE001 - a program that cannot be built runs layer by layer
            entry = NotFused(f"cannot build the fused program of {model_name(self.model)}: {_first_line(exc)}")
        warnings.warn(f"fusion falls back to layer-by-layer execution: {entry.reason}", stacklevel=4)
        return entry

    def summary(self) -> FusionSummary:
        """The last call's groups, ops left out and how it ran; every CPU fallback,
        layer-by-layer run and demotion so far."""
        last = self._last
        cpu = tuple(Fallback(op, "cpu", NO_DEVICE_KERNEL, n) for op, n in self._cpu_fallbacks.items())
        if isinstance(last, NotFused):
            whole = Fallback(model_name(self.model), LAYER_BY_LAYER, last.reason, self._layer_by_layer_calls)
            return FusionSummary((), (whole,) + cpu, self._stats, last.reason, LAYER_BY_LAYER, last.reason,
                                 self._demotions)
        if last is None:
            return FusionSummary((), cpu, self._stats, demotions=self._demotions)
        executed_as, reason = program_provenance(last)
        return FusionSummary(last.group_summaries(), last.fallbacks() + cpu, self._stats, None, executed_as, reason,
                             self._demotions)


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
