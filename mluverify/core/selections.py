"""The device's forward selections, which the CPU reference of a gradient follows at near ties.

A gradient through ReLU or max pooling depends on a discrete choice of the forward: which
elements are positive, which element of each window is the largest. Where the input nearly
ties (a ReLU input ~0, two window elements ~equal), the rounding of the layers before (MLU270's
int16 operands, MLU370's TF32) can make the device choose otherwise than the CPU's float32,
and the gradient element is then wholly different although every kernel is right: a few
flipped masks give a network's gradients rel_mse of percents (docs/training.md).

So a ``grad=True`` case records each selecting op's choice on the device (``record``) and runs
its CPU reference again taking the device's choice (``follow``) wherever the two differ and the
CPU's own input is within ``TIE`` of a tie (relative to the input's largest magnitude);
everywhere else the CPU keeps its own choice, so a kernel that selects wrongly beyond rounding
still shows. The reference is then the CPU's gradient of the device's forward. Only the ops
whose backward reads the choice from their result are followed: ``relu`` / ``relu_`` (the
backward masks by ``result > 0``) and ``max_pool2d_with_indices`` (it routes by the indices).
torch is imported only when a case runs.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

# A near tie: the CPU's margin (|x| for ReLU, the window's lead over the device's pick for max
# pooling) at most this share of the input's largest magnitude. Measured on the training suite's
# float32 steps (suites/training): the flips of the MNIST Net lie within 2.1e-4 of the largest
# magnitude, ResNet18's within 9.3e-3 (layer4, where batch norm normalizes 4 values a channel and
# amplifies the forward's rounding); 2 % leaves a margin over both, far below the inputs' spread
# (their RMS is 18-40 % of the largest), where a wrong choice beyond rounding lies.
TIE = 0.02
RELU_OPS = ("aten::relu", "aten::relu_")
MAX_POOL_OPS = ("aten::max_pool2d_with_indices",)


@dataclass(frozen=True)
class Selection:
    """One selecting op's choice on the device: the op, its input's shape, and the choice on
    the CPU (ReLU: the mask ``result > 0``; max pooling: the indices)."""

    op: str
    shape: tuple[int, ...]
    choice: Any


@dataclass(frozen=True)
class Followed:
    """What ``follow`` did: how many elements took the device's choice, and why it did not
    follow the device's forward (``""``: it followed every selection)."""

    elements: int = 0
    problem: str = ""


# The dispatch mode a gradient probe's forward runs under while ``record`` or ``follow`` runs (a
# context variable: the back end runs the probe in the caller's thread). Only the forward: an
# active Python mode makes autograd take its subclass-safe backward formulas, other ops.
_FORWARD_MODE: ContextVar[type | None] = ContextVar("mluverify_selection_mode", default=None)


def forward_mode() -> ContextManager:
    """What a gradient probe (``mluverify.core.gradients``) enters around its forward: the mode of
    the ``record`` or ``follow`` in progress, else nothing."""
    mode = _FORWARD_MODE.get()
    return mode() if mode is not None else contextlib.nullcontext()


def record(run: Callable[[], Any]) -> tuple[Any, list[Selection]]:
    """``run()`` and the choices the selecting ops of its gradient probes' forwards made, in order."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    selections: list[Selection] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            shape = tuple(args[0].shape) if args and isinstance(args[0], torch.Tensor) else ()
            result = func(*args, **(kwargs or {}))
            chosen = (result > 0) if name in RELU_OPS else result[1] if name in MAX_POOL_OPS else None
            # a plain tensor only: a fused target tracing the case (fake or functional tensors)
            # computes nothing here, and a traced constant would break its capture
            if type(chosen) is torch.Tensor:
                selections.append(Selection(name, shape, chosen.cpu()))
            return result

    return _run_under(Recorder, run), selections


def follow(selections: list[Selection], run: Callable[[], Any]) -> tuple[Any, Followed]:
    """``run()`` on the CPU, each selecting op of its gradient probes' forwards taking the device's choice (``selections``, as
    ``record`` returned them) where the CPU's input is within ``TIE`` of a tie. A selection that
    does not line up (another op, another shape, one too few) stops the following: the result
    is then not the device forward's gradient and ``Followed.problem`` says why."""
    from torch.utils._python_dispatch import TorchDispatchMode

    taken, problems = [], []  # elements taken per selection; why the selections did not line up

    def next_selection(name: str, shape: tuple[int, ...]) -> Selection | None:
        if problems:
            return None
        if len(taken) == len(selections):
            problems.append(f"the CPU ran more selecting ops than the device ({len(selections)})")
            return None
        selection = selections[len(taken)]
        if (selection.op, selection.shape) != (name, shape):
            problems.append(f"selecting op {len(taken) + 1}: {name} {list(shape)} on the CPU, "
                            f"{selection.op} {list(selection.shape)} on the device")
            return None
        return selection

    class Follower(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            selection = next_selection(name, tuple(args[0].shape)) if name in RELU_OPS + MAX_POOL_OPS else None
            if selection is None:
                return func(*args, **(kwargs or {}))
            take_device = _follow_relu if name in RELU_OPS else _follow_max_pool
            result, elements = take_device(func, args, kwargs or {}, selection.choice)
            taken.append(elements)
            return result

    result = _run_under(Follower, run)
    if not problems and len(taken) != len(selections):
        problems.append(f"the CPU ran {len(taken)} selecting ops, the device {len(selections)}")
    return result, Followed(sum(taken), "".join(problems))


def _run_under(mode: type, run: Callable[[], Any]) -> Any:
    """``run()`` with ``mode`` as the probes' ``forward_mode``."""
    token = _FORWARD_MODE.set(mode)
    try:
        return run()
    finally:
        _FORWARD_MODE.reset(token)


def _near_tie(margin: Any, x: Any) -> Any:
    """Where ``margin`` (>= 0) is within ``TIE`` of the largest magnitude of ``x``."""
    return margin <= TIE * x.detach().abs().max()


def _follow_relu(func: Any, args: tuple, kwargs: dict, device_mask: Any) -> tuple[Any, int]:
    """ReLU taking the device's mask at near ties: a taken positive is ``|x|`` (at least the
    smallest normal, so the backward's ``result > 0`` holds), a taken zero is 0."""
    import torch

    x = args[0]
    if x.numel() == 0:
        return func(*args, **kwargs), 0
    take = (device_mask.to(x.device) != (x > 0)) & _near_tie(x.abs(), x)
    taken = torch.where(device_mask.to(x.device), x.abs().clamp_min(torch.finfo(x.dtype).tiny),
                        torch.zeros_like(x))
    result = func(*args, **kwargs)  # relu_ writes into x: `taken` is computed before
    result.copy_(torch.where(take, taken, result))
    return result, int(take.sum())


def _follow_max_pool(func: Any, args: tuple, kwargs: dict, device_indices: Any) -> tuple[Any, int]:
    """Max pooling taking the device's index (and the CPU input's value there) at near ties."""
    import torch

    values, indices = func(*args, **kwargs)
    x = args[0]
    if values.numel() == 0:
        return (values, indices), 0
    device_indices = device_indices.to(indices.device)
    picked = x.flatten(-2).gather(-1, device_indices.flatten(-2)).view_as(values)
    take = (device_indices != indices) & _near_tie(values - picked, x)
    return (torch.where(take, picked, values), torch.where(take, device_indices, indices)), int(take.sum())


def device_forward_reference(run: Callable[[], tuple], selections: list[Selection],
                             expected: tuple) -> tuple[tuple, str]:
    """The reference of a gradient probe (``mluverify.core.gradients``) whose gradients and
    updated parameters follow the device's forward (``run()`` under ``follow``); its output stays
    the CPU's own, ``expected[0]``. Returns the reference and a note for the records (``""``
    when no selection differed: then ``expected`` itself)."""
    if not selections:
        return expected, ""
    result, followed = follow(selections, run)
    if followed.problem:
        return expected, f"reference gradients do not follow the device's forward: {followed.problem}"
    if not followed.elements:
        return expected, ""
    return ((expected[0], *result[1:]),
            f"reference gradients follow the device's forward at {followed.elements} near-tie selections "
            f"(ReLU masks, max-pool argmaxes)")
