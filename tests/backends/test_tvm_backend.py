"""``tvm:cpu`` (Apache TVM Relax built for llvm, mluverify/plugins/tvm_backend.py): a small program
and a small network end to end through the pytest front end, with the records' version,
compile seconds and ``executed_as``; a wrong lowering planted through the front end's own
converter map is a failed case while the clean back end passes the same program; what it cannot
do is refused or errors the case by name.

Skipped with the install line where apache-tvm is not installed (the extra is out of the default
install); under ``CI=true`` it fails where the package is installed but cannot run.
"""
from __future__ import annotations

import importlib.util
from importlib.metadata import version

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify import compare
from mluverify.core.case import Case, Target
from mluverify.errors import BackendError
from mluverify.plugins.tvm_backend import TvmBackend
from tests.backends.test_real_compilers import PROGRAM_ARGS, program, require
from tests.backends.test_real_compilers import SUITE as REAL_SUITE

# Imported before pytester snapshots sys.modules: a C extension first imported inside a pytester
# test is dropped from sys.modules after it, and importing it again fails (see test_real_compilers).
if importlib.util.find_spec("tvm"):
    import tvm  # noqa: F401

INSTALL = "pip install 'mluverify[tvm]'"
TARGET = Target.parse("tvm:cpu")
needs_tvm = pytest.mark.usefixtures("require_tvm")


@pytest.fixture
def require_tvm() -> None:
    require(TvmBackend(), "tvm:cpu", "tvm")


# the program and the small CNN (float32, float16, bfloat16) the other real compilers run, and what
# tvm:cpu refuses
SUITE = REAL_SUITE + """
def test_network_backward(verify):
    verify(network(), torch.randn(2, 3, 8, 8), op="small_cnn", grad=True)

def test_network_int8(verify):
    verify(network(), torch.randn(2, 3, 8, 8), op="small_cnn", quant="int8")
"""

# relu lowered as abs through the front end's converter map, by a plugin of the user's
PLANTED = """
from mluverify import hookimpl
from mluverify.plugins.tvm_backend import TvmBackend

def wrong_relu(node, importer):
    from tvm import relax
    return importer.block_builder.emit(relax.op.abs(importer.env[node.args[0]]))

@hookimpl(trylast=True)
def mluverify_add_backends(registry):
    registry.add(TvmBackend(convert_map={"relu.default": wrong_relu}))
"""


def _run(pytester: pytest.Pytester, *options: str) -> tuple[pytest.RunResult, pd.DataFrame]:
    pytester.makepyfile(test_real=SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=tvm:cpu", "-rs", "-p", "no:cacheprovider",
                                           f"--mlu-report={run}", *options)
    records = pd.read_parquet(run / "records.parquet")
    return result, records[records["kind"] == "output"].set_index("case_id")


@needs_tvm
@pytest.mark.slow
def test_a_program_and_a_network_run_end_to_end_and_what_it_cannot_do_is_refused(pytester):
    result, records = _run(pytester)
    status = records["status"].to_dict()
    assert status == {"test_real.py::test_program[tvm:cpu]": "passed",
                      "test_real.py::test_network[tvm:cpu-float32]": "passed",
                      "test_real.py::test_network[tvm:cpu-float16]": "errored",
                      "test_real.py::test_network[tvm:cpu-bfloat16]": "errored"}, records["reason"]
    # TVM's front end computes every convolution and matmul into float32 (reports/tvm/repro_half_matmul_float32.py):
    # a half-precision layer's float32 product meets its half-precision bias and the import fails, by name
    half = records[records["status"] == "errored"]
    assert half["reason"].str.contains("TVM's PyTorch front end cannot import the program: TypeError: Binary "
                                       "operators must have the same datatype").all(), half["reason"]
    records = records[records["status"] == "passed"]
    assert (records["executed_as"] == "fused").all() and (records["compile_s"] > 0).all()
    assert set(records["device_impl"]) == {f"apache-tvm {version('apache-tvm')} relax llvm"}
    # the compile is not the case's run: a run of the VM takes far less than the build
    assert (records["duration_s"] < records["compile_s"]).all(), records[["duration_s", "compile_s"]]
    result.stdout.fnmatch_lines([
        "*test_network_backward*tvm:cpu does not run backward: it runs a compiled inference program*",
        "*test_network_int8*tvm:cpu runs a float module as it is and quantizes nothing*"])


@needs_tvm
@pytest.mark.slow
def test_a_wrong_lowering_planted_through_the_converter_map_fails_the_case(pytester):
    pytester.makepyfile(planted_tvm=PLANTED)
    _, records = _run(pytester, "-p", "planted_tvm", "-k", "test_program or float32")
    assert records["status"].to_dict() == {"test_real.py::test_program[tvm:cpu]": "failed",
                                           "test_real.py::test_network[tvm:cpu-float32]": "failed"}
    assert (records["value"] > 0.02).all(), records[["value", "reason"]]


@needs_tvm
def test_the_planted_lowering_is_what_changes_the_result():
    from tvm import relax

    def wrong_relu(node, importer):
        return importer.block_builder.emit(relax.op.abs(importer.env[node.args[0]]))

    case = Case("t.py::test_program[tvm:cpu]", "program", TARGET)
    expected = program(*PROGRAM_ARGS)
    assert compare(TvmBackend().execute(program, PROGRAM_ARGS, {}, case=case).output, expected, mode="cnml").passed
    planted = TvmBackend(convert_map={"relu.default": wrong_relu}).execute(program, PROGRAM_ARGS, {}, case=case)
    # abs instead of relu: the sum of |x| over linspace(-2, 2, 24) is twice that of relu(x)
    torch.testing.assert_close(planted.output[1], 2 * expected[1])


@needs_tvm
def test_an_op_tvm_cannot_import_errors_the_case_with_its_message():
    case = Case("t.py::test_eig[tvm:cpu]", "eigvals", TARGET)
    with pytest.raises(BackendError, match=r"^case t.py::test_eig\[tvm:cpu\]: TVM's PyTorch front end cannot import "
                                           r"the program: AssertionError: Unsupported function types "
                                           r"\['linalg_eig.default'\]"):
        TvmBackend().execute(torch.linalg.eigvals, (torch.eye(3),), {}, case=case)


@needs_tvm
def test_numbers_and_zero_dimensional_tensors_cross_as_the_call_passes_them():
    # TVM's front end takes tensors only: a float argument is a constant of the program, and a 0-d
    # tensor keeps its shape
    case = Case("t.py::test_mul[tvm:cpu]", "mul", TARGET)
    output = TvmBackend().execute(torch.mul, (torch.tensor([1.0, -2.0]), 2.5), {}, case=case).output
    assert output.tolist() == [2.5, -5.0]
    output = TvmBackend().execute(torch.add, (torch.tensor(1.5), torch.tensor(2.0)), {}, case=case).output
    assert output.shape == () and output.item() == 3.5


@needs_tvm
def test_bfloat16_crosses_as_its_bits_and_is_computed_by_tvm():
    case = Case("t.py::test_relu[tvm:cpu-bfloat16]", "relu", TARGET, dtype="bfloat16")
    x = torch.tensor([-1.5, 0.0, 3.140625, 1e30], dtype=torch.bfloat16)
    output = TvmBackend().execute(torch.relu, (x,), {}, case=case).output
    assert output.dtype == torch.bfloat16 and torch.equal(output, torch.relu(x))


def test_without_apache_tvm_the_target_names_the_install_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tvm" else real(name, *a))
    assert TvmBackend().unavailable_reason() == f"tvm not installed ({INSTALL})"


@needs_tvm
def test_an_input_that_is_not_64_byte_aligned_is_copied_into_memory_tvm_allocated():
    # TVM's kernels refuse data off a 64-byte boundary ("FromDLPack: Data is not aligned to 64
    # bytes"): every op-suite case whose input was a view errored before the copy
    x = torch.arange(-8.0, 8.0)[1:9]
    assert x.data_ptr() % 64 != 0
    case = Case("t.py::test_relu[tvm:cpu]", "relu", TARGET)
    assert torch.equal(TvmBackend().execute(torch.relu, (x,), {}, case=case).output, torch.relu(x))
