"""Every target takes what the others take, or refuses it with the reason: an ordinary module
(parameters that require grad) in float32, float16 and bfloat16, and a quantization recorded only
where something was quantized (issue 35)."""
from __future__ import annotations

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify.core.case import Case, Target
from mluverify.core.pipeline import cast_floating
from mluverify.plugins.ort_backend import OrtBackend
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)


def _module() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))


@pytest.mark.parametrize("dtype, atol", [("float32", 1e-6), ("float16", 4e-3)])
def test_ort_runs_a_module_whose_parameters_require_grad_in_the_cases_dtype(ort_available, dtype, atol):
    module, x = _module(), torch.linspace(-2, 2, 16).reshape(2, 8)
    case = Case(f"t[{dtype}]", "mlp", Target("ort", "cpu"), dtype=dtype)
    output = OrtBackend().execute(module, cast_floating((x,), dtype), {}, case=case).output
    assert output.dtype == getattr(torch, dtype)
    torch.testing.assert_close(output.float(), module(x).detach(), atol=atol, rtol=0)
    # the user's module is left as it was: float32, trainable
    assert all(p.requires_grad and p.dtype == torch.float32 for p in module.parameters())


def test_ort_refuses_bfloat16_cases_and_says_why(ort_available):
    case = Case("t[bfloat16]", "mlp", Target("ort", "cpu"), dtype="bfloat16")
    reason = OrtBackend().refusal(_module(), case)
    assert "bfloat16" in reason and "onnxruntime" in reason
    assert OrtBackend().refusal(_module(), Case("t", "mlp", Target("ort", "cpu"), dtype="float16")) is None


def test_an_onnxruntime_session_error_names_the_case(ort_available):
    from mluverify.errors import BackendError

    case = Case("t.py::test_relu[ort:cpu]", "relu", Target("ort", "cpu"))
    # exported fine, but the CPU execution provider has no int64 Relu kernel
    with pytest.raises(BackendError, match=r"^case t.py::test_relu\[ort:cpu\]: onnxruntime cannot run the "
                                           r"exported graph: .*Relu"):
        OrtBackend().execute(torch.relu, (torch.arange(-3, 4),), {}, case=case)


SUITE = """
import torch

def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_module(verify, dtype):
    torch.manual_seed(1)
    verify(mlp(), torch.randn(4, 8), op="mlp", dtype=dtype)

def test_module_int8(verify):
    torch.manual_seed(1)
    verify(mlp(), torch.randn(4, 8), op="mlp", quant="int8")

def test_function_int8(verify):
    verify(torch.relu, torch.linspace(-1, 1, 8), op="relu", quant="int8")

def test_module_grad(verify):
    torch.manual_seed(1)
    verify(mlp(), torch.randn(4, 8, requires_grad=True), op="mlp", grad=True)
"""


def _run(pytester, *targets: str, options: tuple[str, ...] = ()) -> tuple[pytest.RunResult, pd.DataFrame]:
    pytester.makepyfile(test_targets="import pytest\n" + SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", *(f"--mlu-target={t}" for t in targets), *options, "-rs",
                                           "-p", "no:cacheprovider", f"--mlu-report={run}")
    records = pd.read_parquet(run / "records.parquet")
    return result, records[records["kind"] == "output"].set_index("case_id")  # not the fused groups' own


def test_quant_is_recorded_only_where_the_target_quantized(pytester):
    result, records = _run(pytester, "mlu:cnnl", "mlu:cnml", options=("-k", "float32 or int8"))
    # mlu:cnnl runs a float module as it is: an int8 case there is a skip with the reason, no record
    result.stdout.fnmatch_lines([
        "*test_module_int8*mlu:cnnl-MLU270*: mlu:cnnl runs a float module as it is and quantizes nothing*"
        "quant='int8'*mlu:cnml*quantize_dynamic_mlu*",
        "*test_function_int8*mlu:cnml-MLU270*: mlu:cnml quantizes the layers of a module (nn.Linear, nn.Conv*"
        "relu has none*"])
    assert "test_targets.py::test_module_int8[mlu:cnnl-MLU270]" not in records.index
    assert not any("test_function_int8" in case_id for case_id in records.index)
    fused_int8 = records.loc["test_targets.py::test_module_int8[mlu:cnml-MLU270]"]
    fused_float = records.loc["test_targets.py::test_module[mlu:cnml-MLU270-float32]"]
    assert (fused_int8.quant, fused_int8.status, fused_int8.bound) == ("int8", "passed", 0.02)
    # quantized for real: int8 weights move the output away from the float32 run's
    assert fused_int8.rel_mse > 10 * fused_float.rel_mse and fused_int8.rel_mse > 1e-4
    assert records.loc[records.quant != "", "target"].tolist() == ["mlu:cnml"]


def test_a_module_with_trainable_parameters_runs_on_ort_in_float32_and_float16(pytester, ort_available):
    result, records = _run(pytester, "ort:cpu")
    statuses = records["status"].to_dict()
    assert statuses == {"test_targets.py::test_module[ort:cpu-float32]": "passed",
                        "test_targets.py::test_module[ort:cpu-float16]": "passed"}, records["reason"]
    # what ort:cpu does not compute is a skip with the reason, never a record
    result.stdout.fnmatch_lines(["*test_module*ort:cpu-bfloat16*: ort:cpu does not compute in bfloat16*",
                                 "*test_module_int8*ort:cpu*: ort:cpu runs a float module as it is*"
                                 "(the modes that quantize: ort:int8)*",
                                 "*test_module_grad*ort:cpu*: ort:cpu does not run backward*"])


@pytest.mark.parametrize("target", ["cpu:inductor", "cpu64:eager", "ort:cpu"])
def test_targets_that_do_not_quantize_refuse_a_quantized_case_of_a_float_module(target):
    from mluverify.core.backends import BackendRegistry
    from mluverify.core.plugin_manager import call_hook, new_plugin_manager

    registry = BackendRegistry()
    call_hook(new_plugin_manager(), "mluverify_add_backends", registry=registry)
    resolved, backend = registry.resolve(target)
    case = Case("t", "mlp", resolved, quant="int16")
    assert backend.refusal(_module(), case).startswith(f"{target} runs a float module as it is and quantizes nothing")
    assert backend.refusal(_module(), Case("t", "mlp", resolved)) is None


def test_ort_refuses_gradient_cases_and_says_why():
    case = Case("t", "mlp", Target("ort", "cpu"))
    assert "ONNX export records no backward" in OrtBackend().refusal(_module(), case, grad=True)
    assert OrtBackend().refusal(_module(), case) is None
