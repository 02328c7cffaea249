"""Gradients of PyTorch OpInfo samples on the device: every ``op_db`` entry that reaches a device
kernel (forward or backward) and supports autograd, a few float32 CPU samples each, made with
``requires_grad=True`` (OpInfo marks exactly the differentiable tensors), judged with
``verify(..., grad=True)``: the output and every input gradient, each its own record.

Entries come from the ``opinfo`` case source (``mluverify.plugins.opinfo_cases``), seeded as it
seeds them; known deviations are in ``waivers.toml`` beside this file (keys ``opinfo:<case>``).
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
from training_waivers import waiver_marks

SAMPLES_PER_ENTRY = 2  # the default selection stays cheap (make verify: 10 minutes on 2 cores)


def _opinfo_source(config: pytest.Config) -> Any:
    """The OpInfo case source among this run's (``mluverify_case_sources``)."""
    from mluverify.pytest_plugin.plugin import plugin_manager

    answers = plugin_manager(config).hook.mluverify_case_sources()
    return next(source for answer in answers for source in answer if source.name == "opinfo")


def _device_ops() -> set[str]:
    """The ops with a device kernel, forward and backward (view ops have no gradient to judge)."""
    import mluverify.device as md

    return md.kernel_registry().op_names()


def _samples(info, seed: int) -> list:
    """The entry's float32 CPU samples with ``requires_grad=True``, seeded like the source's."""
    import torch

    from mluverify.plugins.opinfo_cases import opinfo_samples

    torch.manual_seed(seed)
    samples = list(opinfo_samples(info, torch.float32, requires_grad=True))
    return list(enumerate(samples))[::-(-len(samples) // SAMPLES_PER_ENTRY)] if samples else []


def _params(config: pytest.Config) -> list:
    source = _opinfo_source(config)
    params = []
    for info in source.entries(_device_ops()):
        if not info.supports_autograd:
            continue
        name = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
        try:
            samples = _samples(info, source.seed)
        except Exception as exc:  # a private API: this entry cannot make samples here
            params.append(pytest.param(None, None, None, id=f"{name}-samples",
                                       marks=pytest.mark.skip(reason=f"{type(exc).__name__}: {exc}")))
            continue
        for index, sample in samples:
            case = f"{name}-{index}"
            params.append(pytest.param(info.op, name, sample, id=case, marks=waiver_marks(f"opinfo:{case}")))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A parametrize mark, as a decorator would add: pytest applies marks after the plugins'
    # parametrization, so case ids keep the target first (test_opinfo_gradient[mlu:cnnl-...-sum-0]).
    if metafunc.definition.name == "test_opinfo_gradient":
        metafunc.definition.add_marker(pytest.mark.parametrize("fn, name, sample", _params(metafunc.config)))


@pytest.mark.mlu_targets("mlu:cnnl")
def test_opinfo_gradient(verify, fn: Callable, name: str, sample: Any) -> None:
    import torch

    def op(input: Any, args: tuple, kwargs: dict) -> Any:
        return fn(input, *args, **kwargs)

    verify(op, sample.input, tuple(sample.args), dict(sample.kwargs), op=name, grad=True,
           reproducer=f"OpInfo {name!r} float32 CPU sample with requires_grad (torch {torch.__version__}, "
                      f"samples seeded with 0); pytest -p mluverify suites/training -k 'test_opinfo_gradient and {name}'")
