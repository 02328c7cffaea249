"""``ort:int8``: a small CNN quantized by onnxruntime's own quantizer, saved, loaded back and run
in int8; judged by the ``cnml`` bound; its per-layer errors; bad input."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from int8_models import check_refusals, cnn, images, run_case, with_outlier

from mluverify.core.backends import Backend
from mluverify.core.calibration import calibrating_on
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.errors import BackendError, InvalidArgument, Unsupported
from mluverify.plugins.ort_backend import OrtBackend
from mluverify.plugins.ort_int8_backend import (
    OrtQuantization, layer_errors, module_name, ort_quantization, quantized_layers, run_saved, save_int8)
from mluverify.report.records import ShardWriter
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)

INT8 = Target("ort", "int8")


def _verify(pipeline: Pipeline, model, *args, target: Target = INT8, **options):
    return run_case(pipeline, target, model, *args, **options)


def test_a_small_cnn_runs_in_int8_on_onnxruntime_within_the_cnml_bound(ort_available, pipeline):
    outcome = _verify(pipeline, cnn(), images())
    assert outcome.status == "passed", outcome.why
    row = outcome.record.as_row()
    assert row["quant"] == "int8" and row["target"] == "ort:int8"
    assert "int8: quantize_static QDQ s8s8 per-tensor, calibrated on the case's inputs (2 sample(s))" in row["device_impl"]
    # really quantized: an int8 error, far above the float run's of the same export on ort:cpu
    float_run = _verify(pipeline, cnn(), images(), quant="", target=Target("ort", "cpu"))
    assert outcome.verdict.value > 1e-4 > 100 * float_run.verdict.value


def test_the_scheme_and_granularity_are_the_quantizers_and_the_records(ort_available, pipeline, tmp_path):
    with ort_quantization(scheme="u8s8", granularity="per-channel"):
        outcome = _verify(pipeline, cnn(), images())
        saved = save_int8(cnn(), (images(),), tmp_path / "cnn.int8.onnx")
    assert "QDQ u8s8 per-channel" in outcome.record.as_row()["device_impl"]
    graph = onnx.load(str(saved)).graph
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    quantize = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    assert {constants[n.input[2]].dtype for n in quantize} == {np.dtype("uint8")}  # u8 activations
    weight = next(n for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0].endswith("0.weight_quantized"))
    assert constants[weight.input[0]].dtype == np.int8 and constants[weight.input[1]].shape == (8,)  # s8, per channel


def test_the_calibration_set_decides_the_ranges(ort_available, pipeline):
    own = _verify(pipeline, cnn(), images())
    with ort_quantization(calibration=(images() * 20,)):  # ranges 20x too wide: coarser steps
        wide = _verify(pipeline, cnn(), images())
    assert "calibrated on 1 batch(es), 2 sample(s)" in wide.record.as_row()["device_impl"]
    assert wide.verdict.value > 10 * own.verdict.value
    case = Case("t[ort:int8]", "cnn", INT8, quant="int8")
    with calibrating_on([images() * 20], case, OrtBackend()):  # what verify(..., calibration=...) sets
        from_verify = _verify(pipeline, cnn(), images())
    assert from_verify.verdict.value == wide.verdict.value


def test_a_per_channel_scheme_says_how_many_calibration_samples_it_needs(ort_available, pipeline):
    few = tuple(torch.randn(1, 3, 16, 16) for _ in range(3))
    with ort_quantization(granularity="per-channel", calibration=few), \
            pytest.raises(InvalidArgument, match=r"per-channel quantization needs at least 19 calibration samples, "
                                                  r"the calibration set has 3: give 16 more, or granularity='per-tensor'"):
        _verify(pipeline, cnn(), images())
    enough = tuple(torch.randn(2, 3, 16, 16) for _ in range(10))  # batches of the exported shape
    with ort_quantization(granularity="per-channel", calibration=enough):
        assert _verify(pipeline, cnn(), images()).status == "passed"


def test_the_saved_model_runs_the_same_in_a_fresh_process(ort_available, tmp_path):
    path = save_int8(cnn(), (images(),), tmp_path / "cnn.int8.onnx")
    assert len(quantized_layers(path)) == 3
    np.save(tmp_path / "x.npy", images().numpy())
    script = textwrap.dedent(f"""
        import numpy as np, onnxruntime
        session = onnxruntime.InferenceSession({str(path)!r}, providers=["CPUExecutionProvider"])
        np.save({str(tmp_path / "y.npy")!r}, session.run(None, {{"input0": np.load({str(tmp_path / "x.npy")!r})}})[0])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    in_memory = OrtBackend().execute(cnn(), (images(),), {}, case=Case("t", "cnn", INT8, quant="int8"))
    assert np.array_equal(np.load(tmp_path / "y.npy"), in_memory.output.numpy())
    assert torch.equal(run_saved(path, (images(),))[0], in_memory.output)


def test_a_planted_outlier_is_the_worst_layer_and_fails_while_keeping_it_float_passes(ort_available, pipeline):
    planted = with_outlier(cnn())
    errors = layer_errors(planted, images())
    assert list(errors["layer"]) == ["0", "2", "4"] and list(errors["type"]) == ["Conv"] * 3
    assert errors.loc[errors["rel_mse"].idxmax(), "layer"] == "4"
    assert errors.set_index("layer").loc["4", "rel_mse"] > 0.02 > errors.set_index("layer").loc["2", "rel_mse"]
    assert _verify(pipeline, planted, images()).status == "failed"
    with ort_quantization(exclude=("4",)):
        kept = _verify(pipeline, planted, images())
        assert list(layer_errors(planted, images())["layer"]) == ["0", "2"]
    assert kept.status == "passed", kept.why
    assert "1 layer(s) in float" in kept.record.as_row()["device_impl"]


def test_module_names_are_read_from_the_exporters_scopes():
    assert module_name("/fn/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1"
    assert module_name("/fn/layer2/layer2.0/downsample/downsample.0/Conv") == "layer2.0.downsample.0"
    assert module_name("/fn/fn.0/Conv") == "0"
    assert module_name("/fn/fc/Gemm") == "fc"
    assert module_name("/Gemm") == "/Gemm"  # no module: the node's own name


@pytest.mark.parametrize(("options", "message"), [
    ({"scheme": "s4s4"}, r"ort:int8 quantization scheme 's4s4'; valid: 's8s8', 'u8s8'"),
    ({"granularity": "per-row"}, r"granularity 'per-row'; valid: 'per-channel', 'per-tensor'"),
    ({"format": "QDQ8"}, r"format 'QDQ8'; valid: 'QDQ', 'QOperator'"),
    ({"exclude": "fc"}, r"exclude='fc' \(type=str\): give a tuple"),
])
def test_an_option_the_quantizer_does_not_take_names_it_and_the_choices(options, message):
    with pytest.raises(InvalidArgument, match=message):
        OrtQuantization(**options)


def test_a_layer_not_in_the_model_names_it_and_the_layers(ort_available, pipeline):
    with ort_quantization(exclude=("conv9",)), pytest.raises(InvalidArgument, match=r"'conv9'.*'0', '2', '4'"):
        _verify(pipeline, cnn(), images())


class _Unexportable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.cummax(self.conv(x), dim=1).values


def test_a_model_the_exporter_cannot_export_errors_with_its_message(ort_available, pipeline):
    with pytest.raises(BackendError, match=r"torch.onnx.export failed: .*aten::cummax"):
        _verify(pipeline, _Unexportable(), images())


def test_cases_int8_does_not_run_as_asked_are_refused(ort_available, pipeline):
    check_refusals(pipeline, INT8, Target("ort", "cpu"))


def test_int8_is_a_mode_of_every_ort_back_end_a_plugin_adds():
    own = OrtBackend(translations={torch.ops.aten.relu.default: abs})  # a plugin's own lowering of relu
    assert set(own.modes) == {"cpu", "dynamo", "int8"} and own.quantizing_modes == ("int8",)
    assert "int8" in own.compiling_modes
    registry = Pipeline(new_plugin_manager(entry_points=False), Settings(), Path("unused"), ShardWriter).backends
    assert type(registry.get("ort")) is OrtBackend  # one owner of "ort"


def test_a_calibration_set_needs_a_quantization_and_batches():
    with pytest.raises(InvalidArgument, match=r"calibration= calibrates a quantization.*give quant='int8'"), \
            calibrating_on([images()], Case("t", "cnn", INT8), OrtBackend()):
        pass
    with pytest.raises(Unsupported, match=r"own:int8 calibrates on the case's own inputs.*that do: none"), \
            calibrating_on([images()], Case("t", "cnn", Target("own", "int8"), quant="int8"), _OwnInputsOnly()):
        pass


class _OwnInputsOnly(Backend):
    """A back end whose int8 mode calibrates on the case's own inputs (as the emulator's modes)."""

    name = "own"
    modes = {"int8": "cnml"}
    quantizing_modes = ("int8",)

    def execute(self, fn, args, kwargs, *, case):
        raise AssertionError("not run")
    with pytest.raises(InvalidArgument, match=r"a sequence of batches, got one Tensor of shape \(2, 3, 16, 16\)"):
        OrtQuantization(calibration=images())
