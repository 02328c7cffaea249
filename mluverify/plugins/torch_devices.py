"""Back ends for plain torch devices: ``cuda``, ``xpu``, ``mps`` when present, and ``cpu64``,
a self-check target that recomputes every case on the CPU in float64.

They prove the back-end protocol with no emulated device involved: any accelerator with a
torch device gets layer-by-layer verification (mode ``eager``, policy ``cnnl``) for free.
``cuda`` has two eager modes: ``eager`` computes float32 matmuls and convolutions in IEEE float32
(TF32 off), ``tf32`` lets them use TF32 (judged by ``cnnl`` too: TF32 is the float32 matmul of
the MLU370's layer-by-layer mode). Compiled modes (``cpu:inductor``, ``cuda:inductor``) come
from ``mluverify.plugins.inductor_backend``.
"""
from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Callable, Iterator

from mluverify.core.backends import Backend, BackendRegistry, Execution, map_tensors, move_module
from mluverify.core.case import Case
from mluverify.core.hookspecs import hookimpl

# A mode's implementation: (fn, args, kwargs, case) -> Execution, with the module and the
# inputs already on the device; the output may stay there.
Runner = Callable[[Callable, tuple, dict, Case], Execution]
# Says why a back end cannot run here (None: it can).
Requirement = Callable[[], "str | None"]


def run_eager(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Execution:
    """Call ``fn`` eagerly: every op on the device's own kernel."""
    return Execution(fn(*args, **kwargs))


@contextlib.contextmanager
def cuda_fp32_precision(precision: str) -> Iterator[None]:
    """CUDA float32 matmuls, convolutions and RNNs in ``precision`` (``"ieee"``: TF32 off,
    ``"tf32"``: TF32 allowed) inside the block, the previous settings restored after it."""
    import torch

    settings = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    saved = [s.fp32_precision for s in settings]
    try:
        for s in settings:
            s.fp32_precision = precision
        yield
    finally:
        for s, value in zip(settings, saved):
            s.fp32_precision = value


def with_fp32_precision(precision: str, runner: Runner) -> Runner:
    """``runner`` with CUDA float32 math in ``precision`` (see ``cuda_fp32_precision``)."""
    def run(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Execution:
        with cuda_fp32_precision(precision):
            return runner(fn, args, kwargs, case)

    run.__name__ = f"{getattr(runner, '__name__', type(runner).__name__)}_{precision}"
    return run


class TorchDeviceBackend(Backend):
    """A torch device with one runner per execution mode (default: ``eager``, policy ``cnnl``),
    optionally computing in another floating dtype (``compute_dtype``) than the case's.

    ``requirement`` says why the back end cannot run here beyond the device being absent
    (e.g. no C++ compiler for a compiler back end); a mode may add its own (``add_mode``).
    """

    def __init__(self, name: str, device: str, *, compute_dtype: str | None = None,
                 runners: dict[str, tuple[str, Runner]] | None = None,
                 requirement: Requirement | None = None, compiling_modes: tuple[str, ...] = ()) -> None:
        self.name = name
        self.device = device
        self.compute_dtype = compute_dtype
        self.runners = dict(runners) if runners is not None else {"eager": ("cnnl", run_eager)}
        self.requirement = requirement
        self.mode_requirements: dict[str, Requirement] = {}
        self.compiling_modes = compiling_modes

    @property
    def modes(self) -> dict[str, str]:
        return {mode: policy for mode, (policy, _) in self.runners.items()}

    @property
    def opaque_modes(self) -> tuple[str, ...]:  # a compiled program's kernels (Inductor's) are no torch ops
        return self.compiling_modes

    def add_mode(self, mode: str, policy: str, runner: Runner, requirement: Requirement | None = None,
                 *, compiles: bool = False) -> None:
        """Add (or replace) an execution mode judged by tolerance policy ``policy``;
        ``requirement`` says why the mode cannot run here (None when it can); ``compiles``: the
        runner compiles each distinct program (see ``Backend.compiling_modes``)."""
        self.runners[mode] = (policy, runner)
        self.compiling_modes = tuple(m for m in self.compiling_modes if m != mode) + ((mode,) if compiles else ())
        if requirement is not None:
            self.mode_requirements[mode] = requirement

    def mode_unavailable_reason(self, mode: str) -> str | None:
        requirement = self.mode_requirements.get(mode)
        return requirement() if requirement is not None else None

    def unavailable_reason(self) -> str | None:
        import torch

        module = getattr(torch, self.device, None)
        if self.device != "cpu" and not (module is not None and module.is_available()):
            return f"torch.{self.device}.is_available() is False on this machine"
        return self.requirement() if self.requirement is not None else None

    def __repr__(self) -> str:
        return (f"TorchDeviceBackend({self.name!r}, {self.device!r}, compute_dtype={self.compute_dtype!r}, "
                f"modes={self.modes!r})")

    def device_impl(self) -> str:
        """What ran the case: the GPU's name on ``cuda``, the device type otherwise."""
        import torch

        return torch.cuda.get_device_name() if self.device == "cuda" else self.device

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        import torch

        self.policy(case.mode)  # unknown mode: InvalidArgument listing the valid ones
        _, runner = self.runners[case.mode]
        dtype = getattr(torch, self.compute_dtype or case.dtype)
        if isinstance(fn, torch.nn.Module):
            fn = move_module(fn, self.device, dtype)

        def to_device(t: torch.Tensor) -> torch.Tensor:
            return t.to(self.device, dtype) if t.is_floating_point() else t.to(self.device)

        def to_cpu(t: torch.Tensor) -> torch.Tensor:
            # Back to the case's precision only what the device computed in its own dtype; an
            # output the op itself gives another dtype (softmax(dtype=float64)) keeps it.
            t = t.detach().cpu()
            return t.to(getattr(torch, case.dtype)) if self.compute_dtype and t.dtype == dtype else t

        execution = runner(fn, map_tensors(to_device, args), map_tensors(to_device, kwargs), case)
        return replace(execution, output=map_tensors(to_cpu, execution.output),
                       info={"device_impl": self.device_impl(), **execution.info})


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(TorchDeviceBackend("cpu64", "cpu", compute_dtype="float64"))
    registry.add(TorchDeviceBackend("cuda", "cuda", runners={
        "eager": ("cnnl", with_fp32_precision("ieee", run_eager)),
        "tf32": ("cnnl", with_fp32_precision("tf32", run_eager)),
    }))
    for device in ("xpu", "mps"):
        registry.add(TorchDeviceBackend(device, device))
