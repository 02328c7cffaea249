"""PyTorch OpInfo samples for every op the device claims, judged by the target mode's policy.

Cases come from the ``opinfo`` case source (``mluverify_case_sources``): the float32 CPU sample
inputs of each ``op_db`` entry that reaches a device kernel or one of the layout ops the device
runs through torch's generic implementations, computed by the device in float32, and some of
them in float16 (inputs on float16's grid; ids end in ``-float16``). Known deviations are
listed, with a reason and an expiry date, in ``waivers.toml`` beside this file and applied as
``mlu_waiver`` marks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from mluverify.core.expectations import load_waivers, marker_fields, waiver_for

# Claimed by the device without a kernel of their own: torch's generic implementations run them
# on device memory (see mluverify.device.builtin_kernels).
GENERIC_OPS = ("view", "reshape", "permute", "transpose", "flatten", "contiguous", "expand", "split", "chunk")
WAIVERS_FILE = Path(__file__).with_name("waivers.toml")


def _claimed_ops() -> list[str]:
    import mluverify.device as md

    return [*md.kernel_registry().op_names(), *GENERIC_OPS]


def _opinfo_source(config: pytest.Config) -> Any:
    """The OpInfo case source among this run's (``mluverify_case_sources``)."""
    from mluverify.pytest_plugin.plugin import plugin_manager

    sources = [s for answer in plugin_manager(config).hook.mluverify_case_sources() for s in answer]
    return next(s for s in sources if s.name == "opinfo")


def _params(config: pytest.Config) -> list:
    waivers = load_waivers(WAIVERS_FILE)
    params = []
    for case in _opinfo_source(config).cases(_claimed_ops()):
        waiver = waiver_for(case.case_name, waivers)
        marks = [] if waiver is None else [pytest.mark.mlu_waiver(waiver.reason, waiver.until, **marker_fields(waiver))]
        params.append(pytest.param(case, id=case.case_name, marks=marks))
    return params


def _tensor_call(fn: Callable, input: Any, args: tuple, kwargs: dict) -> tuple[Callable, list]:
    """``fn(input, *args, **kwargs)`` as a callable of the sample's tensors alone, and those
    tensors: they move to the target; everything else (sizes, dims, a ``dtype=``) stays bound,
    as constants of the call (a fused target captures tensors as its inputs)."""
    import torch
    from torch.utils import _pytree as pytree

    leaves, spec = pytree.tree_flatten((input, args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def call(*tensors: Any) -> Any:
        filled = list(leaves)
        for position, tensor in zip(positions, tensors):
            filled[position] = tensor
        input, args, kwargs = pytree.tree_unflatten(filled, spec)
        return fn(input, *args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "opinfo_op")
    return call, [leaves[i] for i in positions]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A parametrize mark, as a decorator would add: pytest applies marks after the plugins'
    # parametrization, so case ids keep the target first (test_opinfo_sample[mlu:cnnl-...-abs-0]).
    if metafunc.definition.name == "test_opinfo_sample":
        metafunc.definition.add_marker(pytest.mark.parametrize("case", _params(metafunc.config)))


def test_opinfo_sample(verify, case) -> None:
    import torch

    call, tensors = _tensor_call(case.fn, case.input, case.args, case.kwargs)
    # OpInfo's samples include inputs whose result is NaN by definition (the unbiased std of one
    # element): NaN / Inf positions must still match the CPU's, the rest is judged.
    verify(call, *tensors, op=case.op, dtype=case.dtype, expect_non_finite=True,
           reproducer=f"OpInfo {case.op!r} float32 CPU sample {case.index}, computed in {case.dtype} (torch "
                      f"{torch.__version__}, op_db samples seeded with 0); "
                      f"pytest -p mluverify suites/opinfo -k '{case.case_name}'")
