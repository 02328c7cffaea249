"""Built-in plugin: the back end ``mlu`` and its execution modes.

The device is a real ``torch_mlu`` when one can be imported, the emulated MLU
(``mluverify.device``) otherwise; each record says which ran (``device_impl``). ``mlu:cnnl``
runs a case layer by layer: every op dispatches to a device kernel (or a CPU fallback),
judged by the ``cnnl`` policy. ``mlu:cnml`` runs it fused (MagicMind-like groups, quantized
when the case asks for int8 / int16), judged by the ``cnml`` policy, and says how much of it
really ran fused (``executed_as``, ``not_fused_reason``). ``mlu:offline`` (emulator) saves the
fused program as an offline model, loads it back and runs it: bit for bit ``mlu:cnml``. Each
mode is one runner in ``MluBackend.runners`` (mode -> (policy, runner)). Only the fused modes
quantize a float module when a case names ``quant``; ``mlu:cnnl`` refuses such a case (it would
run it in float). A module quantized with the emulator's ``quantize_dynamic_mlu`` runs quantized
on every mode (``MluBackend.quantized_width``), so the case is recorded and judged as a quantized
one. A case runs under its ``core_version`` (the emulator's default, MLU270, when it names none),
restored afterwards; the record holds the core version and core number that ran.
"""
from __future__ import annotations

import contextlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from mluverify.core.backends import Backend, BackendRegistry, Execution, GroupOutputs, map_tensors, move_module
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl

EMULATOR, TORCH_MLU = "emulator", "torch_mlu"


@dataclass(frozen=True)
class Ran:
    """What a runner returns when it knows how the case ran; a runner returning anything else
    returned the output of a plain device (``executed_as="device"``) run."""

    output: Any
    executed_as: str = "device"
    not_fused_reason: str = ""
    groups: tuple[GroupOutputs, ...] = ()  # fused runs: each fusion group beside its own CPU graph


Runner = Callable[[Callable, tuple, dict, Case], Any]


def device_impl() -> str:
    """``torch_mlu`` when a real ``torch_mlu`` can be imported, ``emulator`` otherwise.

    A real one is a package on disk; the emulator's alias (``mluverify.compat``, whose finder
    sits last on ``sys.meta_path``, so a real one is found first) has no location.
    """
    spec = importlib.util.find_spec("torch_mlu")
    return TORCH_MLU if spec is not None and spec.has_location else EMULATOR


def call_on_mlu(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Any:
    """Move a copy of the module and the inputs to ``mlu`` and call it eagerly."""
    import torch

    if isinstance(fn, torch.nn.Module):  # floating weights in the case's precision, as its inputs
        fn = move_module(fn, "mlu", getattr(torch, case.dtype) if case.dtype != "float32" else None)
    return fn(*map_tensors(_to_mlu, args), **map_tensors(_to_mlu, kwargs))


def run_layer_by_layer(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Any:
    """The emulator's ``cnnl`` mode: ``call_on_mlu`` with every op on its CNNL kernel."""
    from mluverify.device import kernel_mode

    with kernel_mode("cnnl"):
        return call_on_mlu(fn, args, kwargs, case)


def run_fused(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Ran:
    """The emulator's ``cnml`` mode: fuse the case's callable on ``mlu`` (quantized when
    ``case.quant`` is int8 / int16; see ``mluverify.plugins._fused_targets``), say how much
    of it ran fused and hand over each fusion group's outputs beside its own graph on the CPU."""
    from mluverify.plugins._fused_targets import run_fused as run

    output, summary, groups = run(fn, args, kwargs, case)
    return Ran(output, summary.executed_as, summary.not_fused_reason, groups)


def run_offline(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Ran:
    """The emulator's ``offline`` mode: the ``cnml`` program saved as an offline model, loaded
    and run (see ``mluverify.device.offline``); only whole-fused models save."""
    from mluverify.plugins._fused_targets import run_offline as run

    return Ran(run(fn, args, kwargs, case), "fused")


def run_traced_on_torch_mlu(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Ran:
    """A real ``torch_mlu``'s ``cnml`` mode, the seeds' fused flow: ``torch.jit.trace`` on the
    CPU, the traced module moved to ``mlu``, called with ``mlu`` inputs.

    torch_mlu does not report which ops left its fusion groups, so a call with fusion on is
    recorded as ``fused``; with ``_jit_override_can_fuse_on_mlu(False)`` as ``layer-by-layer``.
    """
    import torch

    from mluverify.plugins._bound_call import BoundCall

    dtype = getattr(torch, case.dtype)
    module = BoundCall(move_module(fn, "cpu", dtype) if isinstance(fn, torch.nn.Module) else fn, kwargs).eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, args, check_trace=False)
        output = traced.to("mlu")(*map_tensors(_to_mlu, args))
    mlu_model = _torch_mlu_model()
    can_fuse = getattr(mlu_model, "_jit_can_fuse_on_mlu", lambda: True)()
    if can_fuse:
        return Ran(output, "fused")
    return Ran(output, "layer-by-layer", "fusion is disabled (_jit_override_can_fuse_on_mlu(False))")


def _torch_mlu_model() -> Any:
    import torch_mlu.core.mlu_model as mlu_model

    return mlu_model


def _to_mlu(t):
    return t.to("mlu")


def _to_cpu(t):
    return t.detach().cpu()


@contextlib.contextmanager
def running_on_torch_mlu(core_version: str) -> Iterator[dict[str, Any]]:
    """Run on a real torch_mlu under ``core_version`` (when not ""; the previous one restored
    after) and yield the record's device facts, read as the case finishes: ``core_version`` and
    ``core_number`` (None where torch_mlu cannot tell)."""
    mlu_model = _torch_mlu_model()
    get_version = getattr(mlu_model, "get_core_version", None)
    previous = get_version() if get_version else None
    if core_version:
        mlu_model.set_core_version(core_version)
    facts: dict[str, Any] = {}
    try:
        yield facts
        facts.update(torch_mlu_facts(core_version))
    finally:
        if core_version and previous is not None:
            mlu_model.set_core_version(previous)


def torch_mlu_facts(core_version: str) -> dict[str, Any]:
    """The record's device facts of a real torch_mlu now: ``core_version`` (``core_version``, the
    one asked for, where torch_mlu cannot tell) and ``core_number`` (None where it cannot tell)."""
    mlu_model = _torch_mlu_model()
    get_version = getattr(mlu_model, "get_core_version", None)
    return {"core_version": get_version() if get_version else core_version or None,
            "core_number": getattr(mlu_model, "get_core_number", lambda: None)()}


def quantized_width(fn: Callable) -> str:
    """The narrowest integer type (``"int8"``, ``"int16"``) among the layers of a module
    quantized by the emulator's ``quantize_dynamic_mlu`` (their ``quantized_mode``), ``""``
    for anything else: the case is then judged as that quantized model."""
    import torch

    from mluverify.device.quantization import QMAX, MLUConv1d, MLUConv2d, MLUConv3d, MLULinear, QuantMode

    if not isinstance(fn, torch.nn.Module):
        return ""
    layers = (MLULinear, MLUConv1d, MLUConv2d, MLUConv3d)
    widths = {QuantMode.from_code(int(m.quantized_mode.reshape(-1)[0])).dtype
              for m in fn.modules() if isinstance(m, layers)}
    return min(widths, key=QMAX.__getitem__, default="")


# Modes of the emulator that run fused programs: their reductions use the core number.
FUSED_MODES = ("cnml", "offline")


@contextlib.contextmanager
def running_on_emulator(core_version: str, mode: str) -> Iterator[dict[str, Any]]:
    """Run on the emulator under ``core_version`` (restored after) and yield the record's device
    facts as the case finishes: the core version, and the cores its reductions were split across
    (the core number for fused modes, the fixed layer-by-layer count otherwise)."""
    from mluverify.device import numerics

    facts: dict[str, Any] = {}
    with numerics.numerics_settings(core_version=core_version):
        yield facts
        facts.update(emulator_facts(mode))


def emulator_facts(mode: str) -> dict[str, Any]:
    """The record's device facts of the emulator now, for a case of ``mode``: the core version,
    and the cores its reductions are split across (the core number for fused modes, the fixed
    layer-by-layer count otherwise)."""
    from mluverify.device import numerics

    return {"core_version": numerics.active_core_version(),
            "core_number": numerics.cores_for("cnml" if mode in FUSED_MODES else "cnnl")}


# The emulator's core versions (its numerics profiles, ``mluverify.device.numerics.PROFILES``),
# the default first; written out so that listing them does not import the device.
EMULATED_CORE_VERSIONS = ("MLU270", "MLU370")


class MluBackend(Backend):
    """The MLU, one runner per execution mode.

    :param impl: ``emulator`` (``import mluverify.device``) or ``torch_mlu`` (a real one);
        default: ``device_impl()``. The emulator's variants are its core versions; a real
        torch_mlu has none (it runs on the card it has, under ``case.core_version`` if set).
    """

    name = "mlu"

    def __init__(self, impl: str | None = None) -> None:
        self.impl = impl or device_impl()
        if self.impl == TORCH_MLU:  # quantized cases run on the emulated MLU only
            self.variants: tuple[str, ...] = ()
            self.runners: dict[str, tuple[str, Runner]] = {
                "cnnl": ("cnnl", call_on_mlu), "cnml": ("cnml", run_traced_on_torch_mlu),
            }
        else:
            self.variants = EMULATED_CORE_VERSIONS
            self.runners = {"cnnl": ("cnnl", run_layer_by_layer), "cnml": ("cnml", run_fused),
                            "offline": ("cnml", run_offline)}
            self.quantizing_modes = FUSED_MODES

    @property
    def modes(self) -> dict[str, str]:
        return {mode: policy for mode, (policy, _) in self.runners.items()}

    def add_mode(self, mode: str, policy: str, runner: Runner) -> None:
        """Add (or replace) an execution mode judged by tolerance policy ``policy``."""
        self.runners[mode] = (policy, runner)

    def quantized_width(self, fn: Callable) -> str:
        return quantized_width(fn) if self.impl == EMULATOR else ""

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        reason = super().refusal(fn, case, grad=grad)
        if reason and case.quant and self.impl == EMULATOR:
            return f"{reason}; or verify a module quantized with quantize_dynamic_mlu, which runs quantized on every mode"
        return reason

    def unavailable_reason(self) -> str | None:
        try:
            self._mlu_model()
        except Exception as exc:  # the reason is reported, the target skipped
            what = "the real torch_mlu cannot be imported" if self.impl == TORCH_MLU else \
                "the emulated MLU cannot be registered here"
            return f"{what}: {type(exc).__name__}: {exc}"
        return None

    def _mlu_model(self) -> Any:
        if self.impl == TORCH_MLU:
            return _torch_mlu_model()
        from mluverify.device import mlu_model

        return mlu_model

    def _running(self, case: Case) -> contextlib.AbstractContextManager[dict[str, Any]]:
        if self.impl == TORCH_MLU:
            return running_on_torch_mlu(case.core_version)
        return running_on_emulator(case.core_version or self.variants[0], case.mode)

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        self.policy(case.mode)  # unknown mode: InvalidArgument listing the valid ones
        _, runner = self.runners[case.mode]
        with self._running(case) as facts, self._fallbacks() as fallbacks:
            ran = runner(fn, args, kwargs, case)
            ran = ran if isinstance(ran, Ran) else Ran(ran)
            on_cpu = map_tensors(_to_cpu, ran.output)
        return Execution(on_cpu, fallbacks(), ran.executed_as, ran.not_fused_reason,
                         {"device_impl": self.impl, **facts}, ran.groups)

    @contextlib.contextmanager
    def _fallbacks(self) -> Iterator[Callable[[], tuple[str, ...]]]:
        """Track the CPU fallbacks of the emulator; a real torch_mlu does not report them."""
        if self.impl == TORCH_MLU:
            yield tuple
            return
        from mluverify.device import track_fallbacks

        with track_fallbacks() as tracker:
            yield lambda: tracker.ops

    def __repr__(self) -> str:
        return f"MluBackend(impl={self.impl!r}, modes={self.modes!r})"


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(MluBackend())
