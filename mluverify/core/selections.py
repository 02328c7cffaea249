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
backward masks by ``result > 0``) and ``max_pool2d_with_indices`` (it routes by the indices);
and ``hardtanh`` / ``hardtanh_`` (ReLU6: MobileNets), whose backward masks by ``min < x < max`` of
the input it saved, which the CPU's input takes the device's side at a near tie of either bound.
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
# magnitude, ResNet18's within 9.3e-3 (on 32x32 images, where layer4's batch norm normalized 4
# values a channel and amplified the forward's rounding); 2 % leaves a margin over both, far below
# the inputs' spread (their RMS is 18-40 % of the largest), where a wrong choice beyond rounding lies.
TIE = 0.02
RELU_OPS = ("aten::relu", "aten::relu_")
MAX_POOL_OPS = ("aten::max_pool2d_with_indices",)
HARDTANH_OPS = ("aten::hardtanh", "aten::hardtanh_")
SELECTING_OPS = RELU_OPS + MAX_POOL_OPS + HARDTANH_OPS


@dataclass(frozen=True)
class Selection:
    """One selecting op's choice on the device: the op, its input's shape, and the choice on
    the CPU (ReLU: the mask ``result > 0``; max pooling: the indices; hardtanh: the side, -1 at
    or below ``min``, 1 at or above ``max``, 0 between)."""

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
            chosen = _choice(name, result, args, kwargs or {})
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
    # The last clone and its source: autograd saves an in-place hardtanh_'s input as a clone made
    # just before it, the tensor its backward reads.
    last_clone: list = [None, None]

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
            selection = next_selection(name, tuple(args[0].shape)) if name in SELECTING_OPS else None
            if selection is None:
                result = func(*args, **(kwargs or {}))
                if name == "aten::clone":
                    last_clone[:] = args[0], result
                return result
            if name in HARDTANH_OPS:
                saved = last_clone[1] if name == HARDTANH_OPS[1] and last_clone[0] is args[0] else None
                result, elements = _follow_hardtanh(func, args, kwargs or {}, selection.choice, saved)
            else:
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


def _choice(name: str, result: Any, args: tuple, kwargs: dict) -> Any:
    """The choice a selecting op made (``Selection.choice``), None for another op."""
    if name in RELU_OPS:
        return result > 0
    if name in MAX_POOL_OPS:
        return result[1]
    if name in HARDTANH_OPS:
        return _hardtanh_side(result, *_hardtanh_bounds(args, kwargs))
    return None


def _hardtanh_bounds(args: tuple, kwargs: dict) -> tuple[float, float]:
    """``min_val`` and ``max_val`` of a hardtanh call (the schema's defaults -1 and 1)."""
    low = args[1] if len(args) > 1 else kwargs.get("min_val", -1.0)
    high = args[2] if len(args) > 2 else kwargs.get("max_val", 1.0)
    return float(low), float(high)


def _hardtanh_side(x: Any, low: float, high: float) -> Any:
    """-1 where ``x <= low``, 1 where ``x >= high``, 0 between: where the backward passes the
    gradient (int8)."""
    import torch

    return (x >= high).to(torch.int8) - (x <= low).to(torch.int8)


def _follow_hardtanh(func: Any, args: tuple, kwargs: dict, device_side: Any, saved: Any) -> tuple[Any, int]:
    """hardtanh taking the device's side at near ties of either bound: a taken clamp is the
    bound, a taken pass is ``x`` mirrored into the open interval. The backward masks by the
    input it saved, so the value is written into the input (its other readers see the device's
    side too, moved by at most the tie margin) and into ``saved``, the clone autograd saved for
    an in-place call."""
    import torch

    x = args[0]
    in_place = func._schema.name == HARDTANH_OPS[1]
    # Written into only where the forward made the input itself: an argument of the case (or a
    # view of one) is the caller's tensor, and is the same on the device (no rounding before it).
    if x.numel() == 0 or not (in_place or (x.grad_fn is not None and not x._is_view())):
        return func(*args, **kwargs), 0
    low, high = _hardtanh_bounds(args, kwargs)
    device_side = device_side.to(x.device)
    margin = torch.minimum((x - low).abs(), (x - high).abs())
    take = (device_side != _hardtanh_side(x, low, high)) & _near_tie(margin, x)
    bounds = torch.tensor([low, high], dtype=x.dtype)
    just_inside = torch.nextafter(bounds, bounds.flip(0)).tolist()  # the backward passes strictly inside
    inside = torch.where(x <= low, 2 * low - x, 2 * high - x).clamp(*just_inside)
    value = torch.where(device_side < 0, low, torch.where(device_side > 0, high, inside)).to(x.dtype)
    for read_by_backward in (x, saved) if saved is not None else (x,):
        read_by_backward.copy_(torch.where(take, value, read_by_backward))
    return func(*args, **kwargs), int(take.sum())


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
            f"(ReLU / hardtanh masks, max-pool argmaxes)")
