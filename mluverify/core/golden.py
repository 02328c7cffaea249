"""The CPU results a case is judged against: the float32 reference, and the float64 "golden"
result that tells the device's error from the reference's own.

The golden run widens every floating input, parameter and buffer to float64 (as Inductor's
accuracy mode casts model and inputs with ``cast_to_fp64``) and runs the same callable on the
CPU. An op without a float64 kernel makes the golden part unavailable for that case: the
reason is returned, never raised. ``dtypes_in`` tells the dtypes torch's own result would have in
a reduced precision (a float16 case's output is judged upcast, so its dtype is checked apart).
torch is imported only when a case runs.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from mluverify.core.backends import map_tensors


@dataclass(frozen=True)
class Golden:
    """A float64 result, or why there is none (``output`` None, ``unavailable`` the reason)."""

    output: Any = None
    unavailable: str = ""


def run_golden(fn: Callable, args: tuple, kwargs: Mapping[str, Any],
               prepare: Callable[[Any], None] | None = None) -> Golden:
    """``fn(*args, **kwargs)`` on the CPU with every floating tensor (and a module's parameters
    and buffers) in float64; ``prepare`` is called on a module's float64 copy before it runs
    (to hook its layers)."""
    import torch

    def widen(t: torch.Tensor) -> torch.Tensor:
        return t.detach().double() if t.is_floating_point() else t

    try:
        if isinstance(fn, torch.nn.Module):
            fn = copy.deepcopy(fn).double()
            if prepare is not None:
                prepare(fn)
        with torch.no_grad():
            output = fn(*map_tensors(widen, args), **map_tensors(widen, dict(kwargs)))
    except Exception as exc:  # an op without a float64 kernel: golden part unavailable
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return Golden(unavailable=f"no float64 result: {type(exc).__name__}: {first_line}"[:300])
    return Golden(output=output)


def dtypes_in(fn: Callable, args: tuple, kwargs: Mapping[str, Any], dtype: str) -> list[str] | str:
    """The dtypes of ``fn``'s output tensors (``"float16"``, ...) when torch computes it in
    ``dtype``: every floating input, parameter and buffer cast to it, run on fake tensors (torch's
    meta kernels: no kernel computes). A string instead where fake tensors cannot tell (an op
    without a meta kernel, an output shape that depends on values): why."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    precision = getattr(torch, dtype)

    def fake(t: torch.Tensor) -> torch.Tensor:
        faked = mode.from_tensor(t.detach())
        return faked.to(precision) if t.is_floating_point() else faked

    try:
        with mode, torch.no_grad():
            fake_args, fake_kwargs = map_tensors(fake, args), map_tensors(fake, dict(kwargs))
            if isinstance(fn, torch.nn.Module):
                state = {**dict(fn.named_parameters()), **dict(fn.named_buffers())}
                output = functional_call(fn, map_tensors(fake, state), fake_args, fake_kwargs)
            else:
                output = fn(*fake_args, **fake_kwargs)
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first_line}"[:300]
    return leaf_dtypes(output)


def leaf_dtypes(obj: Any) -> list[str]:
    """The dtype of each tensor in ``obj`` (a nested structure), in order: ``"float16"``, ..."""
    found: list[str] = []
    map_tensors(lambda t: found.append(str(t.dtype).removeprefix("torch.")), obj)
    return found


def identical(first: Any, second: Any) -> str:
    """``""`` when two device outputs are bit-identical (equal NaNs count as equal), else where
    they first differ and how many elements differ there."""
    import torch

    first_leaves, second_leaves = _leaves(first), _leaves(second)
    if len(first_leaves) != len(second_leaves):
        return f"{len(first_leaves)} vs {len(second_leaves)} output tensors"
    for index, (a, b) in enumerate(zip(first_leaves, second_leaves)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {index}: {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
        differ = a != b
        if a.is_floating_point() or a.is_complex():
            differ &= ~(torch.isnan(a) & torch.isnan(b))
        count = int(differ.sum())
        if count:
            return f"output {index}: {count} of {a.numel()} elements differ between the two runs"
    return ""


def _leaves(obj: Any) -> list:
    found: list = []
    map_tensors(lambda t: found.append(t.detach().cpu()), obj)
    return found
