"""Built-in plugin: the back end ``mlu`` (the emulated MLU) and its execution modes.

``mlu:cnnl`` runs a case layer by layer: every op dispatches to a device kernel (or a counted
CPU fallback), judged by the ``cnnl`` policy. ``mlu:cnml`` runs it fused (MagicMind-like
groups, quantized when the case asks for int8 / int16), judged by the ``cnml`` policy.
Each mode is one runner in ``MluBackend.runners`` (mode -> (policy, runner)).
"""
from __future__ import annotations

from typing import Any, Callable

from mluverify.backends import Backend, BackendRegistry, Execution, map_tensors, move_module
from mluverify.case import Case
from mluverify.hookspecs import hookimpl

Runner = Callable[[Callable, tuple, dict, Case], Any]


def run_layer_by_layer(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Any:
    """Move the module and inputs to ``mlu`` and call it eagerly with the ``cnnl`` kernels."""
    import torch

    from mluverify.device import kernel_mode

    if isinstance(fn, torch.nn.Module):  # floating weights in the case's precision, as its inputs
        fn = move_module(fn, "mlu", getattr(torch, case.dtype) if case.dtype != "float32" else None)
    with kernel_mode("cnnl"):
        return fn(*map_tensors(_to_mlu, args), **map_tensors(_to_mlu, kwargs))


def run_fused(fn: Callable, args: tuple, kwargs: dict, case: Case) -> Any:
    """Fuse the case's callable on ``mlu`` (quantized when ``case.quant`` is int8 / int16);
    see ``mluverify.device.fusion.target``."""
    from mluverify.device.fusion.target import run_fused as run

    return run(fn, args, kwargs, case)


def _to_mlu(t):
    return t.to("mlu")


def _to_cpu(t):
    return t.detach().cpu()


class MluBackend(Backend):
    """The emulated MLU (``import mluverify.device``), one runner per execution mode."""

    name = "mlu"

    def __init__(self) -> None:
        self.runners: dict[str, tuple[str, Runner]] = {
            "cnnl": ("cnnl", run_layer_by_layer),
            "cnml": ("cnml", run_fused),
        }

    @property
    def modes(self) -> dict[str, str]:
        return {mode: policy for mode, (policy, _) in self.runners.items()}

    def add_mode(self, mode: str, policy: str, runner: Runner) -> None:
        """Add (or replace) an execution mode judged by tolerance policy ``policy``."""
        self.runners[mode] = (policy, runner)

    def unavailable_reason(self) -> str | None:
        try:
            import mluverify.device  # noqa: F401
        except Exception as exc:  # the reason is reported, the target skipped
            return f"the emulated MLU cannot be registered here: {type(exc).__name__}: {exc}"
        return None

    def execute(self, fn: Callable, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        from mluverify.device import track_fallbacks

        self.policy(case.mode)  # unknown mode: InvalidArgument listing the valid ones
        _, runner = self.runners[case.mode]
        with track_fallbacks() as fallbacks:
            output = runner(fn, args, kwargs, case)
            on_cpu = map_tensors(_to_cpu, output)
        return Execution(on_cpu, fallbacks.ops)

    def __repr__(self) -> str:
        return f"MluBackend(modes={self.modes!r})"


@hookimpl
def mluverify_add_backends(registry: BackendRegistry) -> None:
    registry.add(MluBackend())
