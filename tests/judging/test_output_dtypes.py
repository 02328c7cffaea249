"""A reduced-precision case's output dtypes: judging upcasts the device's float16 output to the
float32 reference, so a device that returned float32 for a float16 op passed on its values
alone (onnxruntime's TorchScript-exported float16 ``addcmul`` is float32, found through the zoo's
ConvNeXt-V2 in float16, whose float32 GRN output onnxruntime then refused). The device's output
dtypes must be torch's in the case's precision, which torch's fake kernels tell where the device
departs from the precision (an op with an explicit float32 ``dtype=`` is float32 in float16 too)."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from mluverify import hookimpl
from mluverify.core.backends import Backend, Execution
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.golden import dtypes_in
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.report.records import ShardWriter


class Widening(Backend):
    """Computes as torch does, then returns every floating output in float32 (``widened``) or as
    it is (``exact``)."""

    name = "widening"
    modes = {"widened": "cnnl", "exact": "cnnl"}

    def execute(self, fn, args: tuple, kwargs: dict, *, case: Case) -> Execution:
        output = fn(*args, **kwargs)
        if case.mode == "widened":
            output = output.float()
        return Execution(output, executed_as="device")


class _Plugin:
    @hookimpl
    def mluverify_add_backends(self, registry) -> None:
        registry.add(Widening())


@pytest.fixture
def pipeline(tmp_path) -> Pipeline:
    pm = new_plugin_manager(entry_points=False)
    pm.register(_Plugin())
    return Pipeline(pm, Settings(), tmp_path / "run", ShardWriter)


def _addcmul(x: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(x, x, x)


def _softmax_in_float32(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1, dtype=torch.float32)


X = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("fn, mode, dtype, passed", [
    (_addcmul, "widened", "float16", False),             # float32 where torch's float16 addcmul is float16
    (_addcmul, "exact", "float16", True),
    (_addcmul, "widened", "float32", True),              # float32 cases are float32
    (_softmax_in_float32, "widened", "float16", True),   # torch gives float32 here too
    (_softmax_in_float32, "exact", "float16", True),
])
def test_a_device_output_of_another_dtype_than_torchs_in_the_precision_fails(pipeline, fn, mode, dtype, passed):
    case = Case(f"t[{fn.__name__}-{mode}-{dtype}]", fn.__name__, Target("widening", mode), dtype=dtype)
    outcome = pipeline.verify(fn, (X,), {}, case)
    assert outcome.verdict.passed is passed, outcome.verdict.reason
    if not passed:
        assert outcome.status == "failed"
        assert outcome.verdict.reason.startswith("dtype mismatch: output 0 is float32, torch's in float16 is float16")


def test_torchs_dtypes_in_a_precision_come_from_fake_kernels_and_a_module_is_cast_too():
    module = torch.nn.Linear(8, 2)
    assert dtypes_in(module, (X,), {}, "float16") == ["float16"]
    assert dtypes_in(lambda x: (x.sum(), x.argmax()), (X,), {}, "bfloat16") == ["bfloat16", "int64"]
    assert dtypes_in(torch.nonzero, (X,), {}, "float16").startswith("DynamicOutputShapeException")
    assert module.weight.dtype == torch.float32  # the module itself is untouched


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None,
                    reason="ort:cpu unavailable: pip install 'mluverify[ort]'")
def test_onnxruntimes_float16_addcmul_is_float32_and_fails(tmp_path):
    pipeline = Pipeline(new_plugin_manager(entry_points=False), Settings(), tmp_path / "run", ShardWriter)
    case = Case("t[addcmul-ort]", "addcmul", Target("ort", "cpu"), dtype="float16")
    outcome = pipeline.verify(_addcmul, (X,), {}, case)
    assert outcome.status == "failed"
    assert "dtype mismatch: output 0 is float32, torch's in float16 is float16" in outcome.verdict.reason
