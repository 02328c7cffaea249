"""CPU runs beside the device (``use_cpu``): each op's own error and the error it inherited.

Two CPU runs per op separate the two:

* the *re-run* takes CPU copies of the op's actual (device) inputs: device output vs re-run
  is the op's **own** error, what its kernel adds (``cpu_result``, as Cambricon's dumper);
* the *reference chain* feeds each op the reference outputs of the ops that produced its
  inputs, as a CPU-only run of the program would: device input vs reference input is the
  error the op **inherited**, device output vs reference output its **total** error.

Both run with every dispatch mode disabled, so a mode under the Dumper (a planted fault, a
profiler) cannot reach the reference.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from mluverify.judge import metrics, rel_mse


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, torch.device) and value.type != "cpu":
        return torch.device("cpu")
    return value


def rerun_on_cpu(func: Callable, args: tuple, kwargs: dict) -> tuple[Any, str | None]:
    """``func`` on CPU copies of its inputs: (output, None), or (None, the failure)."""
    cpu_args, cpu_kwargs = tree_map(_to_cpu, (args, kwargs))
    try:
        return func(*cpu_args, **cpu_kwargs), None
    except Exception as exc:  # noted in the index, never raised: the device result stands
        return None, f"{type(exc).__name__}: {exc}"


def error_metrics(actual: Any, expected: Any) -> dict[str, float]:
    """The judge's metrics of a device output against its CPU counterpart (first tensor of a
    tuple output, which is the op's value for ops such as ``native_batch_norm``), and
    ``nan_mismatch``: positions finite on one side only, which the metrics leave out."""
    actual_tensor, expected_tensor = _first_tensor(actual), _first_tensor(expected)
    if actual_tensor is None or expected_tensor is None or not _is_numeric(expected_tensor):
        return {}
    actual_tensor = actual_tensor.detach().cpu()
    finite_differs = torch.isfinite(actual_tensor) != torch.isfinite(expected_tensor)
    return {**metrics(actual_tensor, expected_tensor),
            "nan_mismatch": int(finite_differs.sum())}


def error_rel_mse(actual: Any, expected: Any) -> float | None:
    """rel_mse of a device output against its reference (first tensor of a tuple output);
    None when there is nothing numeric to compare."""
    actual_tensor, expected_tensor = _first_tensor(actual), _first_tensor(expected)
    if actual_tensor is None or expected_tensor is None or not _is_numeric(expected_tensor):
        return None
    return _rel_mse(actual_tensor, expected_tensor)


def _rel_mse(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.detach().cpu(), expected.detach().cpu()
    if actual.dtype == expected.dtype and torch.equal(actual, expected):
        return 0.0  # equal tensors (most, on a faithful device) skip the float64 copies
    return rel_mse(_float64(actual), _float64(expected))


def _first_tensor(value: Any) -> torch.Tensor | None:
    leaves, _ = tree_flatten(value)
    return next((leaf for leaf in leaves if isinstance(leaf, torch.Tensor)), None)


def _is_numeric(tensor: torch.Tensor) -> bool:
    return tensor.numel() > 0 and (tensor.dtype.is_floating_point or tensor.is_complex())


class ReferenceChain:
    """CPU reference tensors of device tensors, produced op by op beside the device run."""

    def __init__(self) -> None:
        # id(device tensor) -> (weak ref to it, its reference, whether the reference was
        # copied from the tensor itself: made outside the dump, so it inherited nothing)
        self._reference: dict[int, tuple[weakref.ref, torch.Tensor, bool]] = {}

    def inputs(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, float]:
        """Reference inputs of an op about to run, and its inherited error (worst rel_mse
        over its floating inputs). Call before the op: in-place ops change their inputs."""
        inherited = 0.0

        def reference(value: Any) -> Any:
            nonlocal inherited
            if not isinstance(value, torch.Tensor):
                return _to_cpu(value)
            entry = self._lookup(value)
            if entry is None:  # made outside the dump: the reference starts from its value
                known = value.detach().to("cpu", copy=True)
                self._remember(value, known, copied=True)
                return known
            known, copied = entry
            if not copied and _is_numeric(known):
                inherited = max(inherited, _rel_mse(value, known))
            return known

        ref_args, ref_kwargs = tree_map(reference, (args, kwargs))
        return ref_args, ref_kwargs, inherited

    def run(self, func: Callable, ref_args: tuple, ref_kwargs: dict, output: Any) -> Any:
        """Run ``func`` on the reference inputs and map each device output to its reference;
        None (and nothing recorded) if the op fails on the CPU."""
        try:
            ref_output = func(*ref_args, **ref_kwargs)
        except Exception:
            return None
        device_leaves, _ = tree_flatten(output)
        ref_leaves, _ = tree_flatten(ref_output)
        for device, ref in zip(device_leaves, ref_leaves):
            if isinstance(device, torch.Tensor) and isinstance(ref, torch.Tensor):
                self._remember(device, ref, copied=False)
        return ref_output

    def _lookup(self, tensor: torch.Tensor) -> tuple[torch.Tensor, bool] | None:
        entry = self._reference.get(id(tensor))
        return entry[1:] if entry is not None and entry[0]() is tensor else None

    def _remember(self, device: torch.Tensor, ref: torch.Tensor, copied: bool) -> None:
        key = id(device)
        self._reference[key] = (weakref.ref(device, lambda _: self._reference.pop(key, None)),
                                ref, copied)


def _float64(tensor: torch.Tensor) -> Any:
    return tensor.detach().cpu().double().reshape(-1).numpy()
