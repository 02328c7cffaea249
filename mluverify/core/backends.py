"""The back-end protocol: how a device is asked to run a case, and the registry of back ends.

A back end is one device (the emulated MLU, ``cuda``, a real ``torch_mlu``, ...) with one or more
execution modes. Each mode names the tolerance policy that judges it. Back ends come in only
through the hook ``mluverify_add_backends``; the judge never imports a device.
"""
from __future__ import annotations

import abc
import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from mluverify.core.case import Case, Target
from mluverify.errors import InvalidArgument, valid_choice

if TYPE_CHECKING:
    import torch


EXECUTED_AS = ("device", "fused", "partially fused", "layer-by-layer")


@dataclass(frozen=True)
class GroupOutputs:
    """One call of a fusion group in a fused run: the group's name and ops, its outputs as the
    device computed them and those of the group's own (unfused) graph run on the CPU in float32
    given the same inputs, both on the CPU. A kernel error that later ops damp below the case's
    bound still shows in the outputs of its group. ``unjudged``: why the group has no reference
    (its graph raised on the CPU), "" when it has one. ``inside``: for a value computed inside
    the group rather than its outputs (an error the group's own later ops damp), the value's
    name; ``ops`` is then the op that computed it and ``expected`` the value of the group's graph
    on the CPU there. ``against``: what ``expected`` is where it is not the group's own graph
    on the same inputs (a real int8 runtime's layer: the float model's same node), for the reason."""

    name: str
    ops: tuple[str, ...]
    actual: tuple[Any, ...]
    expected: tuple[Any, ...]
    unjudged: str = ""
    inside: str = ""
    against: str = ""


@dataclass(frozen=True)
class Execution:
    """What a back end returns for one case: the output, already on the CPU, and how it ran.

    ``fallback_ops``: the ops that did not run on the device (CPU fallbacks), in the order first
    seen. ``executed_as``: ``"device"`` (eager on the device), ``"fused"`` (one compiled / fused
    program), ``"partially fused"`` (fused groups with ops run layer by layer between them) or
    ``"layer-by-layer"`` (a fused mode that ran op by op); ``not_fused_reason`` says why a fused
    mode did not fuse everything. ``info``: facts about the device for the record, keyed by
    record column (``mluverify.report.records.PROVENANCE_COLUMNS``: ``device_impl``,
    ``core_version``, ``core_number``, ``compile_s``, ``graph_breaks``, ``recompiles``).
    ``groups``: what each fusion group of a fused run computed, beside its own graph on the CPU
    (each judged as a comparison of its own, kind ``group``).
    """

    output: Any
    fallback_ops: tuple[str, ...] = ()
    executed_as: str = "device"
    not_fused_reason: str = ""
    info: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[GroupOutputs, ...] = ()

    def __post_init__(self) -> None:
        if self.executed_as not in EXECUTED_AS:
            raise valid_choice("executed_as", self.executed_as, EXECUTED_AS)


class Backend(abc.ABC):
    """One device and its execution modes.

    Subclasses set ``name`` and ``modes`` (mode -> tolerance policy name) and implement
    ``execute``. ``unavailable_reason`` returns why the back end cannot run here, or None.
    """

    name: str
    modes: Mapping[str, str]
    # Device variants a case can run on, the default first (the MLU's core versions); a back
    # end with variants runs ``case.core_version`` ("" meaning the default).
    variants: tuple[str, ...] = ()
    # Modes that quantize a float module when a case names a quantization (``quant="int8"``);
    # the other modes run a module as it is.
    quantizing_modes: tuple[str, ...] = ()
    # Quantizing modes that calibrate on a case's calibration set (``verify(..., calibration=...)``,
    # ``mluverify.core.calibration``) instead of its own inputs; the others skip such a case.
    calibrating_modes: tuple[str, ...] = ()
    # Modes that compile each distinct program before running it (seconds per graph): the suites
    # draw fewer examples there (``mluverify.plugins.compiled_selection``).
    compiling_modes: tuple[str, ...] = ()
    # Modes whose program runs outside torch's dispatch (a compiler's kernels, a runtime's
    # graph): a Dumper sees only the export's tracing of it, so ``--mlu-dump=fail`` does not
    # re-run their failing cases (dump-diff would judge those tracing ops as the case's, and
    # ``torch.export`` under the Dumper's modes fails, which lost the case's verdict).
    opaque_modes: tuple[str, ...] = ()
    # Why no mode runs a case's backward (``verify(..., grad=True)``); None: they do.
    no_backward: str | None = None

    def unavailable_reason(self) -> str | None:
        """Why this back end cannot run here (no such device, ...), or None."""
        return None

    def mode_unavailable_reason(self, mode: str) -> str | None:
        """Why one of its modes cannot run here although the back end can (e.g. a compiler's
        missing dependency), or None."""
        return None

    def variants_for(self, requested: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """The variants to run a target on: ``requested`` (all must be this back end's), or the
        default one when none is requested; ``()`` for a back end without variants."""
        if not self.variants:
            return ()
        unknown = [v for v in requested if v not in self.variants]
        if unknown:
            raise valid_choice(f"variant (core version) of back end {self.name!r}", unknown[0], self.variants)
        return tuple(requested) or self.variants[:1]

    def quantized_width(self, fn: Callable) -> str:
        """The bit width (``"int8"``) of a module already quantized for this device, which the
        case then runs quantized on every mode; ``""`` for anything else."""
        return ""

    def refusal(self, fn: Callable, case: Case, *, grad: bool = False) -> str | None:
        """Why this back end does not run ``case`` as the case asks (``grad``: with its
        backward), or None; the pipeline then skips the case (``mluverify.errors.Unsupported``).
        Here: a backward it cannot run, a quantization that ``case.mode`` would not make of a
        module that is not quantized already. Back ends add their own (a precision the device
        does not compute) and keep these."""
        if grad and self.no_backward:
            return f"{case.target} does not run backward: {self.no_backward}"
        if not case.quant or case.mode in self.quantizing_modes or self.quantized_width(fn):
            return None
        where = (f"the modes that quantize: {', '.join(f'{self.name}:{m}' for m in self.quantizing_modes)}"
                 if self.quantizing_modes else f"no mode of {self.name} quantizes")
        return (f"{case.target} runs a float module as it is and quantizes nothing, so quant={case.quant!r} "
                f"would record float results as quantized ones ({where})")

    @abc.abstractmethod
    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        """Run ``fn(*args, **kwargs)`` on this device in ``case.mode``; return the output on CPU.

        ``args`` are CPU objects already cast to ``case.dtype``; ``fn`` may be a module, which
        the back end must not modify (copy it before moving it to the device).
        """

    def policy(self, mode: str) -> str:
        """The tolerance policy that judges ``mode``."""
        try:
            return self.modes[mode]
        except KeyError:
            raise valid_choice(f"mode of back end {self.name!r}", mode, list(self.modes)) from None


class BackendRegistry:
    """The back ends of a run's pipeline, by name; resolves target strings to back ends."""

    def __init__(self) -> None:
        self._backends: dict[str, Backend] = {}

    def add(self, backend: Backend) -> None:
        if not isinstance(backend, Backend):
            raise InvalidArgument(
                f"mluverify_add_backends must add Backend instances, got {backend!r} "
                f"(type={type(backend).__name__})"
            )
        self._backends[backend.name] = backend

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._backends.values())

    def __contains__(self, name: str) -> bool:
        return name in self._backends

    def get(self, name: str) -> Backend:
        try:
            return self._backends[name]
        except KeyError:
            raise valid_choice("back end", name, list(self._backends)) from None

    def targets(self) -> list[Target]:
        return [Target(b.name, mode) for b in self for mode in b.modes]

    def resolve(self, target: Target | str) -> tuple[Target, Backend]:
        """Check a target names a known back end and mode; InvalidArgument lists valid targets."""
        target = Target.parse(target) if isinstance(target, str) else target
        backend = self._backends.get(target.backend)
        if backend is None or target.mode not in backend.modes:
            raise valid_choice("target", str(target), [str(t) for t in self.targets()])
        return target, backend


def map_tensors(fn: Callable[["torch.Tensor"], Any], obj: Any) -> Any:
    """Apply ``fn`` to every tensor in a nested structure (tuple, list, dict, namedtuple)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        items = [map_tensors(fn, item) for item in obj]
        if isinstance(obj, list):
            return items
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return type(obj)((key, map_tensors(fn, value)) for key, value in obj.items())
    return obj


def move_module(module: "torch.nn.Module", device: str, dtype: "torch.dtype | None" = None) -> "torch.nn.Module":
    """A copy of ``module`` on ``device`` (and floating parameters in ``dtype``); the original
    stays. A parameter two submodules hold (tied weights) stays one parameter."""
    moved = copy.deepcopy(module)
    tied = _tied_parameters(moved)
    if dtype is not None:
        moved = moved.to(dtype)
    moved = moved.to(device)
    # Module.to makes a new Parameter per holder where the device's tensors cannot take a CPU
    # tensor's .data (a PrivateUse1 device such as the emulated mlu): tie them again, else each
    # copy gets a share of the gradient and the model has more parameters than on the CPU.
    for name, first in tied.items():
        holder, _, attribute = name.rpartition(".")
        setattr(moved.get_submodule(holder), attribute, moved.get_parameter(first))
    return moved


def _tied_parameters(module: "torch.nn.Module") -> dict[str, str]:
    """Each parameter name whose parameter another, earlier name also holds: name -> that name."""
    first_names: dict[int, str] = {}
    tied = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        first = first_names.setdefault(id(parameter), name)
        if first != name:
            tied[name] = first
    return tied
