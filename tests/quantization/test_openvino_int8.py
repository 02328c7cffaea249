"""``openvino:int8``: a small CNN quantized by NNCF, saved as OpenVINO IR, read back and run by the
CPU plugin's int8 kernels; judged by the ``cnml`` bound; its per-layer errors; bad input; and
``verify(..., calibration=...)`` reaching both real int8 targets.

Skipped with the install line where openvino or nncf is missing (extra ``mluverify[openvino-int8]``);
under ``CI=true`` a target whose packages are installed but cannot run fails.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from importlib.metadata import version

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from int8_models import check_refusals, cnn, images, run_case, with_outlier

from mluverify.core.calibration import calibrating_on
from mluverify.core.case import Case, Target
from mluverify.core.pipeline import Pipeline
from mluverify.errors import BackendError, InvalidArgument
from mluverify.plugins.openvino_backend import OpenVinoBackend
from mluverify.plugins.openvino_int8_backend import (
    OpenVinoQuantization, compile_saved, int8_layers, layer_errors, openvino_quantization, quantize, run_saved,
    save_int8)
from mluverify.plugins.ort_backend import OrtBackend

INT8 = Target("openvino", "int8")


@pytest.fixture
def openvino_int8() -> None:
    """Skips with the install line where openvino:int8 cannot run; fails under CI=true where its
    packages are installed but it still cannot."""
    backend = OpenVinoBackend()
    reason = backend.unavailable_reason() or backend.mode_unavailable_reason("int8")
    installed = all(importlib.util.find_spec(name) for name in ("openvino", "nncf"))
    if reason and installed and os.environ.get("CI") == "true":
        pytest.fail(f"openvino:int8 is installed but cannot run: {reason}")
    if reason:
        pytest.skip(f"openvino:int8 unavailable: {reason}")


def _verify(pipeline: Pipeline, model, *args, target: Target = INT8, **options):
    return run_case(pipeline, target, model, *args, **options)


def test_a_small_cnn_runs_in_int8_on_openvino_within_the_cnml_bound(openvino_int8, pipeline):
    outcome = _verify(pipeline, cnn(), images())
    assert outcome.status == "passed", outcome.why
    row = outcome.record.as_row()
    assert row["quant"] == "int8" and row["target"] == "openvino:int8" and row["compile_s"] > 0
    assert row["device_impl"] == (f"openvino {version('openvino')} CPU int8: nncf {version('nncf')} nncf.quantize "
                                  f"performance per-channel, calibrated on the case's inputs (2 sample(s)); "
                                  f"3 layer(s) ran in int8")
    # really quantized: an int8 error, far above the float run's of the same conversion on openvino:cpu
    float_run = _verify(pipeline, cnn(), images(), quant="", target=Target("openvino", "cpu"))
    assert outcome.verdict.value > 1e-3 > 100 * float_run.verdict.value


def _fake_quantize_ranges(model, node: str) -> tuple[np.ndarray, np.ndarray]:
    """input_low and input_high of the FakeQuantize that feeds ``node``'s input ``port`` 0."""
    ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    quantizer = ops[node].input(0).get_source_output().get_node()
    assert quantizer.get_type_name() == "FakeQuantize"
    low, high = (quantizer.input(i).get_source_output().get_node().get_data() for i in (1, 2))
    return low, high


def _weight_scales(model, node: str) -> np.ndarray:
    """The scales of ``node``'s weight, which NNCF stores as int8 constants times these scales."""
    ops = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    scaled = ops[node].input(1).get_source_output().get_node()
    int8 = scaled.input(0).get_source_output().get_node().input(0).get_source_output().get_node()
    assert scaled.get_type_name() == "Multiply" and int8.get_output_element_type(0).get_type_name() == "i8"
    return scaled.input(1).get_source_output().get_node().get_data()


def test_the_preset_and_granularity_are_nncfs_and_the_records(openvino_int8, pipeline):
    first_conv = "convolution/aten.convolution.default/Convolution"
    default = quantize(cnn(), (images(),)).model
    with openvino_quantization(preset="mixed", granularity="per-tensor"):
        outcome = _verify(pipeline, cnn(), images())
        chosen = quantize(cnn(), (images(),)).model
    assert "nncf.quantize mixed per-tensor" in outcome.record.as_row()["device_impl"]
    assert _weight_scales(default, first_conv).shape == (8, 1, 1, 1)  # one scale per output channel
    assert _weight_scales(chosen, first_conv).size == 1
    # performance: symmetric signed activations (low = -high * 128 / 127); mixed: the data's own range
    # (moved by at most a step, so that zero is a level)
    low, high = _fake_quantize_ranges(default, first_conv)
    assert np.allclose(low, -high * 128 / 127)
    low, high = _fake_quantize_ranges(chosen, first_conv)
    assert not np.allclose(low, -high * 128 / 127)
    lowest, highest = float(images().min()), float(images().max())
    step = (highest - lowest) / 255
    assert abs(float(low) - lowest) <= step and abs(float(high) - highest) <= step


def test_the_calibration_set_decides_the_ranges(openvino_int8, pipeline):
    own = _verify(pipeline, cnn(), images())
    with openvino_quantization(calibration=tuple(images(seed) * 20 for seed in range(10))):  # ranges 20x too wide
        wide = _verify(pipeline, cnn(), images())
    assert "calibrated on 10 batch(es), 20 sample(s)" in wide.record.as_row()["device_impl"]
    assert wide.verdict.value > 5 * own.verdict.value
    with calibrating_on([images(seed) * 20 for seed in range(10)], Case("t", "cnn", INT8, quant="int8"),
                        OpenVinoBackend()):  # what verify(..., calibration=...) sets
        from_verify = _verify(pipeline, cnn(), images())
    assert from_verify.verdict.value == wide.verdict.value


def test_the_saved_ir_runs_the_same_in_a_fresh_process(openvino_int8, tmp_path):
    path = save_int8(cnn(), (images(),), tmp_path / "cnn.int8.xml")
    assert (tmp_path / "cnn.int8.bin").exists()
    np.save(tmp_path / "x.npy", images().numpy())
    script = textwrap.dedent(f"""
        import numpy as np, openvino
        compiled = openvino.Core().compile_model({str(path)!r}, "CPU", {{"INFERENCE_PRECISION_HINT": "f32"}})
        request = compiled.create_infer_request()
        request.infer([np.load({str(tmp_path / "x.npy")!r})])
        np.save({str(tmp_path / "y.npy")!r}, request.get_output_tensor(0).data)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    import openvino

    in_memory = openvino.Core().compile_model(quantize(cnn(), (images(),)).model, "CPU",
                                              {"INFERENCE_PRECISION_HINT": "f32"})
    request = in_memory.create_infer_request()
    request.infer([images().numpy()])
    assert np.array_equal(np.load(tmp_path / "y.npy"), request.get_output_tensor(0).data)
    case_run = OpenVinoBackend().execute(cnn(), (images(),), {}, case=Case("t", "cnn", INT8, quant="int8"))
    assert torch.equal(case_run.output, torch.from_numpy(np.load(tmp_path / "y.npy")))
    assert torch.equal(run_saved(path, (images(),))[0], case_run.output)
    assert len(int8_layers(compile_saved(path))) == 3  # the CPU plugin's int8 kernels ran the saved model


def test_a_planted_outlier_is_the_worst_layer_and_fails_while_keeping_it_float_passes(openvino_int8, pipeline):
    planted = with_outlier(cnn())
    pixels = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))  # in [0, 1), as images
    with openvino_quantization(granularity="per-tensor"):
        errors = layer_errors(planted, pixels).set_index("layer")
        failed = _verify(pipeline, planted, pixels)
    assert list(errors.index) == ["0", "2", "4"] and list(errors["type"]) == ["Convolution"] * 3
    assert errors["rel_mse"].idxmax() == "4"
    assert errors.loc["4", "rel_mse"] > 0.02 > 2 * errors.loc["2", "rel_mse"]
    assert failed.status == "failed"
    with openvino_quantization(granularity="per-tensor", exclude=("4",)):
        kept = _verify(pipeline, planted, pixels)
        assert list(layer_errors(planted, pixels)["layer"]) == ["0", "2"]
    assert kept.status == "passed", kept.why
    assert "1 layer(s) in float" in kept.record.as_row()["device_impl"]


@pytest.mark.parametrize(("options", "message"), [
    ({"preset": "accurate"}, r"openvino:int8 quantization preset 'accurate'; valid: 'mixed', 'performance'"),
    ({"granularity": "per-row"}, r"granularity 'per-row'; valid: 'per-channel', 'per-tensor'"),
    ({"exclude": "fc"}, r"exclude='fc' \(type=str\): give a tuple"),
])
def test_an_option_nncf_does_not_take_names_it_and_the_choices(options, message):
    with pytest.raises(InvalidArgument, match=message):
        OpenVinoQuantization(**options)


def test_a_layer_not_in_the_model_names_it_and_the_layers(openvino_int8, pipeline):
    with openvino_quantization(exclude=("conv9",)), pytest.raises(InvalidArgument, match=r"'conv9'.*'0', '2', '4'"):
        _verify(pipeline, cnn(), images())


def test_a_per_channel_scheme_says_how_many_calibration_samples_it_needs(openvino_int8, pipeline):
    with openvino_quantization(calibration=(images(),)), \
            pytest.raises(InvalidArgument, match=r"openvino:int8 per-channel quantization needs at least 19 calibration "
                                                  r"samples, the calibration set has 2: give 17 more"):
        _verify(pipeline, cnn(), images())


class _Unexportable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.linalg.eig(self.conv(x)[..., :4, :4]).eigenvalues.real


def test_a_model_the_converter_cannot_convert_errors_with_its_message(openvino_int8, pipeline):
    with pytest.raises(BackendError, match=r"convert_model failed: .*aten.linalg_eig"):
        _verify(pipeline, _Unexportable(), images())


def test_cases_int8_does_not_run_as_asked_are_refused(openvino_int8, pipeline):
    check_refusals(pipeline, INT8, Target("openvino", "cpu"))


def test_int8_is_a_mode_of_the_openvino_back_end_with_its_own_install_line(monkeypatch):
    backend = OpenVinoBackend()
    assert set(backend.modes) == {"cpu", "default", "int8"} and backend.quantizing_modes == ("int8",)
    assert backend.calibrating_modes == ("int8",) and "int8" in backend.compiling_modes
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "nncf" else real_find_spec(name))
    assert backend.mode_unavailable_reason("int8") == "nncf not installed (pip install 'mluverify[openvino-int8]')"
    assert backend.mode_unavailable_reason("cpu") is None


SUITE = """
import torch

def network():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1)).eval()

def test_calibrated(verify):
    torch.manual_seed(1)
    calibration = [torch.randn(2, 3, 8, 8) for _ in range(10)]
    verify(network(), torch.randn(2, 3, 8, 8), quant="int8", calibration=calibration)
"""


@pytest.mark.slow
def test_verify_takes_a_calibration_set_on_both_real_int8_targets(openvino_int8, pytester):
    if OrtBackend().unavailable_reason():
        pytest.skip(f"ort:int8 unavailable: {OrtBackend().unavailable_reason()}")
    pytester.makepyfile(test_int8=SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", "--mlu-target=ort:int8", "--mlu-target=openvino:int8",
                                           "--mlu-target=mlu:cnml", "-rs", "-p", "no:cacheprovider",
                                           f"--mlu-report={run}")
    records = pd.read_parquet(run / "records.parquet").set_index("target")
    assert set(records.index) == {"ort:int8", "openvino:int8"} and (records["status"] == "passed").all()
    assert records["device_impl"].str.contains("calibrated on 10 batch(es), 20 sample(s)", regex=False).all()
    result.stdout.fnmatch_lines(["*mlu:cnml calibrates on the case's own inputs and takes no calibration= set*"])
