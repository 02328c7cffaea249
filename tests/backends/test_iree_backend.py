"""``iree:cpu`` (IREE compiling for llvm-cpu, mluverify/plugins/iree_backend.py): a small program
and a small network end to end through the pytest front end, with the records' version, compile
seconds and ``executed_as``; a wrong lowering planted through the back end's own decomposition
table is a failed case while the clean back end passes the same program; what it cannot do is
refused or errors the case by name; the precisions that cross numpy's types (bfloat16, float64,
unsigned integers) come back as torch computes them.

Skipped with the install line where IREE is not installed (the extra is out of the default
install); under ``CI=true`` it fails where the packages are installed but cannot run.
"""
from __future__ import annotations

import importlib.util
from importlib.metadata import version

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
import torch

from mluverify.core.case import Case, Target
from mluverify.errors import BackendError
from mluverify.plugins.iree_backend import IreeBackend
from tests.backends.test_real_compilers import PROGRAM_ARGS, REFUSED, program, require, run_suite
from tests.backends.test_real_compilers import SUITE as REAL_SUITE

# Imported before pytester snapshots sys.modules: a C extension first imported inside a pytester
# test is dropped from sys.modules after it, and importing it again fails (see test_real_compilers).
if importlib.util.find_spec("iree") and importlib.util.find_spec("iree.runtime"):  # the parent first: find_spec raises without it
    import iree.runtime  # noqa: F401

INSTALL = "pip install 'mluverify[iree]'"
TARGET = Target.parse("iree:cpu")
needs_iree = pytest.mark.usefixtures("require_iree")


@pytest.fixture
def require_iree() -> None:
    require(IreeBackend(), "iree:cpu", "iree.runtime")


# the program and the small CNN (float32, float16, bfloat16) the other real compilers run, and what
# every real compiler refuses
SUITE = REAL_SUITE + REFUSED


# relu decomposed into abs through the back end's decomposition table, by a plugin of the user's
PLANTED = """
import torch
from mluverify import hookimpl
from mluverify.plugins.iree_backend import IreeBackend

@hookimpl(trylast=True)
def mluverify_add_backends(registry):
    registry.add(IreeBackend(decompositions={torch.ops.aten.relu.default: torch.abs}))
"""


def _run(pytester: pytest.Pytester, *options: str) -> tuple[pytest.RunResult, pd.DataFrame]:
    return run_suite(pytester, SUITE, "--mlu-target=iree:cpu", *options)


@needs_iree
@pytest.mark.slow
def test_a_program_and_a_network_run_end_to_end_and_what_it_cannot_do_is_refused(pytester):
    result, records = _run(pytester)
    assert records["status"].to_dict() == {"test_real.py::test_program[iree:cpu]": "passed",
                                           "test_real.py::test_network[iree:cpu-float32]": "passed",
                                           "test_real.py::test_network[iree:cpu-float16]": "passed",
                                           "test_real.py::test_network[iree:cpu-bfloat16]": "errored"}, records["reason"]
    # IREE cannot compile a bfloat16 constant (reports/iree/repro_bf16_constant.py): a bfloat16
    # module's parameters are constants of its program, and the compile fails, by name
    assert records["reason"]["test_real.py::test_network[iree:cpu-bfloat16]"].startswith(
        "BackendError: case test_real.py::test_network[iree:cpu-bfloat16]: iree-compile failed for llvm-cpu: RuntimeError: "
        "'arith.constant' op failed to verify that all of {value, result} have same type")
    records = records[records["status"] == "passed"]
    assert (records["executed_as"] == "fused").all() and (records["compile_s"] > 0).all()
    assert set(records["device_impl"]) == {f"iree-base-compiler {version('iree-base-compiler')} llvm-cpu host, "
                                           f"iree-turbine {version('iree-turbine')}"}
    # the compile is not the case's run: a call of the compiled module takes far less than the compile
    assert (records["duration_s"] < records["compile_s"]).all(), records[["duration_s", "compile_s"]]
    result.stdout.fnmatch_lines([
        "*test_network_backward*iree:cpu does not run backward: it runs a compiled inference program*",
        "*test_network_int8*iree:cpu runs a float module as it is and quantizes nothing*"])


@needs_iree
@pytest.mark.slow
def test_a_wrong_lowering_planted_through_the_decomposition_table_fails_the_case(pytester):
    pytester.makepyfile(planted_iree=PLANTED)
    _, records = _run(pytester, "-p", "planted_iree", "-k", "test_program or float32")
    assert records["status"].to_dict() == {"test_real.py::test_program[iree:cpu]": "failed",
                                           "test_real.py::test_network[iree:cpu-float32]": "failed"}
    assert (records["value"] > 0.02).all(), records[["value", "reason"]]


@needs_iree
def test_the_planted_lowering_is_what_changes_the_result():
    case = Case("t.py::test_program[iree:cpu]", "program", TARGET)
    expected = program(*PROGRAM_ARGS)
    clean = IreeBackend().execute(program, PROGRAM_ARGS, {}, case=case).output
    torch.testing.assert_close(clean, expected)
    planted = IreeBackend(decompositions={torch.ops.aten.relu.default: torch.abs}).execute(
        program, PROGRAM_ARGS, {}, case=case)
    # abs instead of relu: the sum of |x| over linspace(-2, 2, 24) is twice that of relu(x)
    torch.testing.assert_close(planted.output[1], 2 * expected[1])


@needs_iree
def test_an_op_iree_cannot_lower_errors_the_case_with_the_compilers_message():
    case = Case("t.py::test_eig[iree:cpu]", "eigvals", TARGET)
    with pytest.raises(BackendError, match=r"^case t.py::test_eig\[iree:cpu\]: iree-compile failed for llvm-cpu: "
                                           r"RuntimeError: failed to legalize operation 'torch.operator'.*"
                                           r"torch.aten.linalg_eigvals"):
        IreeBackend().execute(torch.linalg.eigvals, (torch.eye(3),), {}, case=case)


@needs_iree
def test_bfloat16_crosses_as_its_bits_and_is_computed_by_iree():
    case = Case("t.py::test_relu[iree:cpu-bfloat16]", "relu", TARGET, dtype="bfloat16")
    x = torch.tensor([-1.5, 0.0, 3.140625, 1e30], dtype=torch.bfloat16)
    output = IreeBackend().execute(torch.relu, (x,), {}, case=case).output
    assert output.dtype == torch.bfloat16 and torch.equal(output, torch.relu(x))


@needs_iree
def test_float64_is_computed_in_float64_not_demoted():
    # IREE demotes float64 to float32 unless told not to: (1 + 2**-40) rounds to 1 in float32,
    # so a demoted program would return x unchanged
    case = Case("t.py::test_mul[iree:cpu-float64]", "mul", TARGET, dtype="float64")
    x = torch.tensor([1.0, -3.0, 0.1], dtype=torch.float64)
    output = IreeBackend().execute(torch.mul, (x, torch.full((3,), 1 + 2 ** -40, dtype=torch.float64)), {},
                                   case=case).output
    assert output.dtype == torch.float64 and torch.equal(output, x * (1 + 2 ** -40)) and not torch.equal(output, x)


@needs_iree
def test_unsigned_integers_come_back_unsigned():
    # IREE's integers are signless: a uint8 result comes back as int8 and is read by its bits
    case = Case("t.py::test_add[iree:cpu-uint8]", "add", TARGET, dtype="uint8")
    x = torch.tensor([200, 7, 255], dtype=torch.uint8)
    output = IreeBackend().execute(torch.add, (x, x), {}, case=case).output
    assert output.dtype == torch.uint8 and output.tolist() == [144, 14, 254]


@needs_iree
def test_numbers_and_zero_dimensional_tensors_cross_as_the_call_passes_them():
    case = Case("t.py::test_mul[iree:cpu]", "mul", TARGET)
    output = IreeBackend().execute(torch.mul, (torch.tensor([1.0, -2.0]), 2.5), {}, case=case).output
    assert output.tolist() == [2.5, -5.0]
    output = IreeBackend().execute(torch.add, (torch.tensor(1.5), torch.tensor(2.0)), {}, case=case).output
    assert output.shape == () and output.item() == 3.5


def test_without_iree_the_target_names_the_install_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("iree") else real(name, *a))
    assert IreeBackend().unavailable_reason() == f"iree.compiler and iree.runtime and iree.turbine not installed ({INSTALL})"


def test_backward_and_quantization_are_refused_with_the_reason():
    module = torch.nn.Linear(4, 2)
    assert IreeBackend().refusal(module, Case("t", "linear", TARGET), grad=True) == (
        "iree:cpu does not run backward: it runs a compiled inference program, which has no backward")
    assert "quantizes nothing" in IreeBackend().refusal(module, Case("t", "linear", TARGET, quant="int8"))
    assert IreeBackend().refusal(module, Case("t", "linear", TARGET, dtype="bfloat16")) is None
