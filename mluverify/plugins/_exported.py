"""What the back ends that run a case as one exported graph share (``ort``, ``openvino``,
``executorch``): the module they export, its ``torch.export`` program, how long compiling took,
and the error that names the case.

Imports torch only inside its functions, as those plugins do: loading a plugin never loads its
compiler.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from mluverify.core.backends import move_module
from mluverify.core.case import Case
from mluverify.errors import BackendError

# The ONNX opsets of the exporters (ort_backend's float modes, ort_int8_backend's quantized one)
OPSET = 17  # torch.onnx.export(..., dynamo=False), the TorchScript exporter
DYNAMO_OPSET = 20  # the dynamo exporter's own opset in torch 2.14 (no version conversion)

if TYPE_CHECKING:
    import torch
    from torch import nn


def exportable(fn: Callable, kwargs: dict, case: Case) -> "nn.Module":
    """``fn(*args, **kwargs)`` as a module to export: a module is a copy in the case's precision
    whose parameters require no grad (they become constants of the graph); the user's is left
    as it was."""
    import torch

    from mluverify.plugins._bound_call import BoundCall

    if isinstance(fn, torch.nn.Module):
        fn = move_module(fn, "cpu", getattr(torch, case.dtype)).requires_grad_(False)
    return BoundCall(fn, kwargs)


def export_program(module: "nn.Module", args: tuple, case: Case) -> "torch.export.ExportedProgram":
    """The whole program of ``module`` called with ``args``, captured by ``torch.export`` (on
    copies of the inputs: the export must not write into the case's); a capture that fails is
    ``case``'s error with the exporter's reason."""
    import torch

    try:
        with torch.no_grad():
            return torch.export.export(module, tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    except Exception as exc:
        raise export_failure(case, "torch.export failed", exc) from exc


def export_failure(case: Case, what: str, exc: BaseException) -> BackendError:
    """The case's error: what failed and why, from the innermost cause (an exporter wraps the
    converter's error in its own). OpenVINO's errors begin with lines that name its own source
    files ("Exception from src/inference/src/cpp/infer_request.cpp:104:", "Check '...' failed
    at ..."), passed over; its conversion report gives the reason on lines starting with ``--``
    ("-- No conversion rule found for operations: aten.linalg_eig.default")."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    lines = [line.strip() for line in str(root).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(("Exception from src/", "Check '"))] or lines
    why = "; ".join(line.lstrip("- ") for line in said if line.startswith("--")) or (said[0] if said else "")
    return BackendError(f"case {case.case_id}: {what}: {type(root).__name__}: {why[:300]}")


@contextmanager
def timed(seconds: dict[str, Any], key: str = "compile_s") -> Iterator[None]:
    """Add the seconds the block took to ``seconds[key]`` (an Execution's info: the pipeline
    takes ``compile_s`` out of the case's ``duration_s``), also when the block raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - started
