"""PyTorch OpInfo samples for every op the device claims, judged by the target mode's policy.

Cases come from the ``opinfo`` case source (``mluverify_case_sources``): the float32 CPU sample
inputs of each ``op_db`` entry that reaches a device kernel or one of the layout ops the device
runs through torch's generic implementations, computed by the device in float32, and some of
them in float16 (inputs on float16's grid; ids end in ``-float16``). Known deviations are
listed, with a reason and an expiry date, in ``waivers.toml`` beside this file and applied as
``mlu_waiver`` marks.
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable

import pytest

from mluverify import matches_case_id

# Claimed by the device without a kernel of their own: torch's generic implementations run them
# on device memory (see mluverify.plugins.mlu_cnnl_kernels).
GENERIC_OPS = ("view", "reshape", "permute", "transpose", "flatten", "contiguous", "expand", "split", "chunk")
WAIVERS_FILE = Path(__file__).with_name("waivers.toml")


def _claimed_ops() -> list[str]:
    import mluverify.device as md

    return [*md.kernel_registry().op_names(), *GENERIC_OPS]


def _opinfo_source() -> Any:
    from mluverify.plugin_manager import get_plugin_manager

    sources = [s for answer in get_plugin_manager().hook.mluverify_case_sources() for s in answer]
    return next(s for s in sources if s.name == "opinfo")


def _waivers() -> dict[str, dict]:
    """Case-name glob -> {reason, until}, from waivers.toml (``[waivers."<glob>"]`` tables)."""
    with WAIVERS_FILE.open("rb") as f:
        return tomllib.load(f).get("waivers", {})


def _params() -> list:
    waivers = _waivers()
    params = []
    for case in _opinfo_source().cases(_claimed_ops()):
        marks = [pytest.mark.mlu_waiver(w["reason"], w["until"])
                 for pattern, w in waivers.items() if matches_case_id(pattern, case.case_name)][:1]
        params.append(pytest.param(case, id=case.case_name, marks=marks))
    return params


def _call(fn: Callable) -> Callable:
    """``fn`` taking (input, args, kwargs): tensors anywhere in them move to the target."""
    def call(input: Any, args: tuple, kwargs: dict) -> Any:
        return fn(input, *args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "opinfo_op")
    return call


@pytest.mark.parametrize("case", _params())
def test_opinfo_sample(verify, case) -> None:
    import torch

    verify(_call(case.fn), case.input, case.args, case.kwargs, op=case.op, dtype=case.dtype,
           reproducer=f"OpInfo {case.op!r} float32 CPU sample {case.index}, computed in {case.dtype} (torch "
                      f"{torch.__version__}, op_db samples seeded with 0); "
                      f"pytest -p mluverify suites/opinfo -k '{case.case_name}'")
