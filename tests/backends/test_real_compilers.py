"""The real compilers beside ``ort:cpu`` (issue 37): ``ort:dynamo`` (the dynamo exporter, run by
onnxruntime) and ``openvino:cpu`` / ``openvino:default`` (OpenVINO's CPU plugin). Each runs a
small program and a small network end to end through the pytest front end, a wrong lowering
planted through its own hook point (the exporter's translation table, OpenVINO's conversion
extensions) is caught by the judge, and an op it cannot lower errors the case by name.

A target whose package is not installed is skipped with the install line (the extras are out of
the default install); under ``CI=true`` a target whose package is installed but cannot run fails.
"""
from __future__ import annotations

import importlib.util
import os
from importlib.metadata import version

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify import compare
from mluverify.core.backends import Backend
from mluverify.core.case import Case, Target
from mluverify.errors import BackendError
from mluverify.plugins.openvino_backend import OpenVinoBackend
from mluverify.plugins.ort_backend import OrtBackend

# Imported before pytester snapshots sys.modules (as pandas' arrow types above): a C extension first
# imported inside a pytester test is dropped from sys.modules after it, and importing it again
# fails (openvino) or aborts the process (onnx). The pytester tests below import no compiler.
if importlib.util.find_spec("openvino"):
    import openvino

BACKENDS = {"ort:dynamo": OrtBackend, "openvino:cpu": OpenVinoBackend, "openvino:default": OpenVinoBackend}
# the package each target's extra installs
PACKAGES = {"ort:dynamo": "onnxscript", "openvino:cpu": "openvino", "openvino:default": "openvino"}


def _unavailable(target: str) -> str | None:
    resolved = Target.parse(target)
    backend = BACKENDS[target]()
    return backend.unavailable_reason() or backend.mode_unavailable_reason(resolved.mode)


def _require(*targets: str) -> None:
    for target in targets:
        require(BACKENDS[target](), target, PACKAGES[target])


def require(backend: Backend, target: str, package: str) -> None:
    """Skip with ``backend``'s reason (its install line) where ``target`` cannot run; under
    ``CI=true``, fail where its ``package`` is installed but the target still cannot run."""
    reason = backend.unavailable_reason() or backend.mode_unavailable_reason(Target.parse(target).mode)
    # the top-level package first: find_spec("iree.runtime") raises where "iree" is missing
    installed = importlib.util.find_spec(package.split(".")[0]) and importlib.util.find_spec(package)
    if reason and installed and os.environ.get("CI") == "true":
        pytest.fail(f"{target} is installed but cannot run: {reason}")
    if reason:
        pytest.skip(f"{target} unavailable: {reason}")


def program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.softmax(torch.relu(x) @ w, dim=-1), torch.relu(x).sum()


PROGRAM_ARGS = (torch.linspace(-2, 2, 24).reshape(4, 6), torch.linspace(1, -1, 30).reshape(6, 5))

SUITE = """
import pytest
import torch

def program(x, w):
    return torch.softmax(torch.relu(x) @ w, dim=-1), torch.relu(x).sum()

def network():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(32, 5)).eval()

def test_program(verify):
    verify(program, torch.linspace(-2, 2, 24).reshape(4, 6), torch.linspace(1, -1, 30).reshape(6, 5), op="program")

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_network(verify, dtype):
    torch.manual_seed(1)
    verify(network(), torch.randn(2, 3, 8, 8), op="small_cnn", dtype=dtype)
"""


# what every real compiler refuses: a backward, a quantization of a float module (appended to SUITE)
REFUSED = """
def test_network_backward(verify):
    verify(network(), torch.randn(2, 3, 8, 8), op="small_cnn", grad=True)

def test_network_int8(verify):
    verify(network(), torch.randn(2, 3, 8, 8), op="small_cnn", quant="int8")
"""


def _run(pytester: pytest.Pytester, *targets: str) -> tuple[pytest.RunResult, pd.DataFrame]:
    return run_suite(pytester, SUITE, *(f"--mlu-target={t}" for t in targets))


def run_suite(pytester: pytest.Pytester, suite: str, *options: str) -> tuple[pytest.RunResult, pd.DataFrame]:
    """``suite`` (as ``test_real.py``) run through the pytest front end with ``options``: the run's
    result and its output records by case id."""
    pytester.makepyfile(test_real=suite)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", "-rs", "-p", "no:cacheprovider", f"--mlu-report={run}",
                                           *options)
    records = pd.read_parquet(run / "records.parquet")
    return result, records[records["kind"] == "output"].set_index("case_id")


@pytest.mark.slow
def test_ort_dynamo_runs_a_program_and_a_network_end_to_end(pytester):
    _require("ort:dynamo")
    result, records = _run(pytester, "ort:dynamo")
    assert records["status"].to_dict() == {
        "test_real.py::test_program[ort:dynamo]": "passed",
        "test_real.py::test_network[ort:dynamo-float32]": "passed",
        "test_real.py::test_network[ort:dynamo-float16]": "passed"}, records["reason"]
    result.stdout.fnmatch_lines(["*test_network*ort:dynamo-bfloat16*: ort:dynamo does not compute in bfloat16*"])
    assert (records["executed_as"] == "fused").all() and (records["compile_s"] > 0).all()
    assert set(records["device_impl"]) == {f"onnxruntime {version('onnxruntime')}, dynamo exporter "
                                           f"(onnxscript {version('onnxscript')}, opset 20)"}


@pytest.mark.slow
def test_openvino_runs_a_program_and_a_network_end_to_end_in_each_precision(pytester):
    _require("openvino:cpu")
    result, records = _run(pytester, "openvino:cpu", "openvino:default")
    assert len(records) == 8 and (records["status"] == "passed").all(), records[["status", "reason"]]
    assert (records["executed_as"] == "fused").all() and (records["compile_s"] > 0).all()
    # the precision each mode ran in: f32 by the hint, else the CPU plugin's own default here
    default = openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    release = version("openvino")
    assert records.groupby("target")["device_impl"].unique().map(list).to_dict() == {
        "openvino:cpu": [f"openvino {release} CPU f32"], "openvino:default": [f"openvino {release} CPU {default}"]}


def _wrong_relu_onnx(x):
    from onnxscript import opset18 as op

    return op.Abs(x)


def _wrong_relu_openvino(node):
    import openvino.opset14 as ops

    return [ops.abs(node.get_input(0)).output(0)]


def _planted(target: str):
    """The target's back end with relu lowered to abs through the back end's own hook point."""
    if target == "ort:dynamo":
        return OrtBackend(translations={torch.ops.aten.relu.default: _wrong_relu_onnx})
    from openvino.frontend.pytorch import ConversionExtension

    return OpenVinoBackend(extensions=[ConversionExtension("aten.relu.default", _wrong_relu_openvino)])


@pytest.mark.parametrize("target", list(BACKENDS))
def test_a_planted_wrong_lowering_is_caught_and_the_clean_one_passes(target):
    _require(target)
    case = Case(f"t.py::test_program[{target}]", "program", Target.parse(target))
    expected = program(*PROGRAM_ARGS)
    clean = BACKENDS[target]().execute(program, PROGRAM_ARGS, {}, case=case).output
    planted = _planted(target).execute(program, PROGRAM_ARGS, {}, case=case).output
    assert compare(clean, expected, mode="cnml").passed
    verdict = compare(planted, expected, mode="cnml")
    assert not verdict.passed and verdict.value > 0.02, verdict


@pytest.mark.parametrize("target, why", [
    ("ort:dynamo", r"torch.onnx.export failed: DispatchError: No ONNX function found for .*aten.linalg_eig"),
    ("openvino:cpu", r"openvino.convert_model failed: OpConversionFailure: No conversion rule found for operations: "
                     r"aten.linalg_eig.default$"),
])
def test_an_op_the_compiler_cannot_lower_errors_the_case_with_its_message(target, why):
    _require(target)
    case = Case(f"t.py::test_eig[{target}]", "eigvals", Target.parse(target))
    with pytest.raises(BackendError, match=rf"^case t.py::test_eig\[{target}\]: {why}"):
        BACKENDS[target]().execute(torch.linalg.eigvals, (torch.eye(3),), {}, case=case)


@pytest.mark.parametrize("target, module, line", [
    ("ort:dynamo", "onnxscript", "onnxscript not installed (pip install 'mluverify[ort-dynamo]')"),
    ("openvino:cpu", "openvino", "openvino not installed (pip install 'mluverify[openvino]')"),
])
def test_without_its_package_a_target_names_the_install_line(monkeypatch, target, module, line):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    assert _unavailable(target) == line


def test_both_real_compilers_refuse_what_their_graphs_cannot_hold():
    module = torch.nn.Linear(4, 2)
    for target, backend in BACKENDS.items():
        case = Case("t", "linear", Target.parse(target))
        assert "does not run backward" in backend().refusal(module, case, grad=True)
        assert backend().refusal(module, case) is None


@pytest.mark.parametrize("target", ["openvino:cpu", "ort:dynamo"])
def test_zero_dimensional_inputs_keep_their_shape(target):
    # numpy.ascontiguousarray made a 0-d input 1-d, which OpenVINO's input (shape []) refused:
    # every op suite case whose hypothesis example is a scalar tensor errored
    _require(target)
    case = Case(f"t.py::test_add[{target}]", "add", Target.parse(target))
    output = BACKENDS[target]().execute(torch.add, (torch.tensor(1.5), torch.tensor(2.0)), {}, case=case).output
    assert output.shape == () and output.item() == 3.5


def test_a_missing_package_of_a_dotted_name_is_named_with_the_install_line():
    """``iree:cpu`` needs ``iree.runtime``: where ``iree`` itself is missing, the reason is the
    install line (find_spec of the dotted name would raise ModuleNotFoundError)."""
    from mluverify.plugins.ort_backend import missing

    assert missing(("mluverify_no_such_package.runtime", "torch"), "iree") == (
        "mluverify_no_such_package.runtime not installed (pip install 'mluverify[iree]')")


def test_ort_dynamo_computes_a_float16_op_torch_s_cpu_kernels_lack():
    """The dynamo exporter traces with fake tensors, so a float16 op torch's CPU has no kernel for
    (avg_pool3d) runs on onnxruntime; the back end once ran the op eagerly in float16 to learn its
    outputs' structure, and the case errored with torch's NotImplementedError."""
    _require("ort:dynamo")
    x = torch.linspace(-3, 3, 64).reshape(1, 1, 4, 4, 4).half()
    with pytest.raises(NotImplementedError):
        torch.nn.functional.avg_pool3d(x, 2)  # what the eager run met
    case = Case("t.py::test_pool[float16-ort:dynamo-avg_pool3d]", "avg_pool3d", Target.parse("ort:dynamo"),
                dtype="float16")
    execution = OrtBackend().execute(lambda t: torch.nn.functional.avg_pool3d(t, 2), (x,), {}, case=case)
    expected = torch.nn.functional.avg_pool3d(x.float(), 2)
    assert execution.output.dtype == torch.float16 and execution.executed_as == "fused"
    assert compare(execution.output.float(), expected, mode="cnml").passed


@pytest.mark.parametrize("target", ["openvino:cpu", "openvino:default"])
def test_openvino_runs_a_program_that_reads_only_its_input_s_shape(target):
    """OpenVINO's converted model drops an input the program never reads (``torch.eye`` of the
    input's size): the back end feeds the inputs it kept, by name; it once refused the model ("the
    converted model takes 0 inputs, the case passes 1", test_factory's eye and scalar_tensor)."""
    _require(target)
    case = Case(f"t.py::test_factory[{target}-eye]", "eye", Target.parse(target))
    x, y = torch.zeros(3, 4), torch.linspace(0, 1, 4)
    eye = OpenVinoBackend().execute(lambda t: torch.eye(t.shape[-1]), (x,), {}, case=case).output
    assert torch.equal(eye, torch.eye(4))
    second_only = OpenVinoBackend().execute(lambda t, u: u * 2, (x, y), {}, case=case).output
    assert torch.equal(second_only, y * 2)


@pytest.mark.parametrize("target", ["openvino:cpu", "openvino:default"])
def test_openvino_finds_an_input_whose_tensor_carries_other_names(target):
    """The converted model's input tensor may carry names beside the program's (``{'12', 'a_0',
    'constant_pad_nd:0'}`` where the first op pads it), and ``get_any_name`` may give another one:
    feeding by name once looked up '12' and refused the model (im2col, expand, addcmul, softmax
    with a dtype: make verify-real on openvino:default)."""
    _require(target)
    case = Case(f"t.py::test_im2col[{target}-im2col]", "im2col", Target.parse(target))
    x = torch.linspace(-1, 1, 32).reshape(1, 2, 4, 4)
    unfolded = OpenVinoBackend().execute(lambda t: torch.nn.functional.unfold(t, 2), (x,), {}, case=case).output
    assert torch.equal(unfolded, torch.nn.functional.unfold(x, 2))
    a, b, c = torch.linspace(0, 1, 3), torch.linspace(1, 2, 3), torch.linspace(2, 3, 3)
    added = OpenVinoBackend().execute(lambda u, v, w: torch.addcmul(u, v, w, value=2), (a, b, c), {}, case=case).output
    torch.testing.assert_close(added, torch.addcmul(a, b, c, value=2))
