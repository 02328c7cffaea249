"""A model quantized with quantize_dynamic_mlu is recorded with its bit width and judged by the
quantized (cnml, 2 %) bound on every target; the audit keeps int8 and int16 apart."""
import pandas  # imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest

from mluverify.core.case import Case, Target
from mluverify.core.pipeline import QUANTIZED_POLICY, as_run
from mluverify.errors import Unsupported
from mluverify.judge import policy

SUITE = """
import torch
from mluverify.device.quantization import quantize_dynamic_mlu

def model(dtype):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    calibrating = quantize_dynamic_mlu(net, dtype=dtype, gen_quant=True)
    for _ in range(4):
        calibrating(torch.randn(8, 16))
    quantized = quantize_dynamic_mlu(net, dtype=dtype)
    quantized.load_state_dict(calibrating.state_dict())
    return quantized

def test_int8(verify):
    torch.manual_seed(1)
    verify(model("int8"), torch.randn(8, 16), op="mlp")
"""


def test_a_quantize_dynamic_mlu_model_is_recorded_int8_and_judged_by_the_quantized_bound(pytester):
    pytester.makepyfile(test_cases=SUITE)
    run = pytester.path / "run"
    pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={run}", "--mlu-target=mlu:cnnl")
    record = pq.read_table(run / "records.parquet").to_pandas().iloc[0]
    assert record["quant"] == "int8"
    # the documents' bound for quantized models (CNML, 2 %), not cnnl's 0.3 %
    assert record["bound"] == 0.02 and record["tolerance_source"] == "policy:cnml"


def test_a_case_takes_the_quantization_of_its_module_unless_it_names_one():
    import torch

    from mluverify.device.quantization import quantize_dynamic_mlu
    from mluverify.plugins.mlu_backend import MluBackend

    backend, net = MluBackend("emulator"), torch.nn.Sequential(torch.nn.Linear(4, 4))
    int16 = quantize_dynamic_mlu(net, dtype="int16")
    case = Case("t", "mlp", Target("mlu", "cnnl"))
    assert as_run(backend, int16, case).quant == "int16"
    assert as_run(backend, net, case).quant == ""
    assert as_run(backend, int16, Case("t", "mlp", Target("mlu", "cnml"), quant="int8")).quant == "int8"
    assert as_run(backend, net, Case("t", "mlp", Target("mlu", "cnml"), quant="int8")).quant == "int8"
    # layer by layer, a float module named int8 would run in float: refused with the reason
    with pytest.raises(Unsupported, match=r"^case t: mlu:cnnl runs a float module as it is and quantizes nothing"):
        as_run(backend, net, Case("t", "mlp", Target("mlu", "cnnl"), quant="int8"))
    assert policy(QUANTIZED_POLICY).bound == 0.02


def test_the_quantized_width_of_a_module():
    import torch

    from mluverify.device.quantization import quantize_dynamic_mlu
    from mluverify.plugins.mlu_backend import quantized_width

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    assert quantized_width(net) == "" and quantized_width(torch.relu) == ""
    assert quantized_width(quantize_dynamic_mlu(net, dtype="int16")) == "int16"
    mixed = torch.nn.Sequential(quantize_dynamic_mlu(net, dtype="int16"), quantize_dynamic_mlu(net, dtype="int8"))
    assert quantized_width(mixed) == "int8"  # the narrowest decides the error


def test_the_audit_keeps_int8_and_int16_apart():
    from mluverify.report.audit import audit_runs
    from tests.report.report_records import as_frame, make_record

    rows = [make_record(f"q[int8-{i}]", 0.01, op="mlp", target="mlu:cnml", bound=0.02, quant="int8") for i in range(3)]
    rows += [make_record(f"q[int16-{i}]", 1e-5, op="mlp", target="mlu:cnml", bound=0.02, quant="int16")
             for i in range(3)]
    groups = audit_runs([as_frame(rows)]).groups
    by_quant = groups.set_index("quant")
    assert sorted(by_quant.index) == ["int16", "int8"]
    assert by_quant.loc["int8", "max"] == pytest.approx(0.01) and by_quant.loc["int16", "max"] == pytest.approx(1e-5)
