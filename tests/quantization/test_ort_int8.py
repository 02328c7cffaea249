"""``ort:int8``: what is onnxruntime's own (its scheme and format, the saved model in a fresh
process, module names from the exporter's scopes, its options and exporter's failures); what
both real int8 runtimes do alike is in ``test_real_int8.py``."""
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

from int8_models import cnn, images, run_case

from mluverify.core.backends import Backend
from mluverify.core.calibration import calibrating_on
from mluverify.core.case import Case, Target
from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.errors import BackendError, InvalidArgument, Unsupported
from mluverify.plugins._int8 import has_vnni
from mluverify.plugins.ort_backend import OrtBackend
from mluverify.plugins.ort_int8_backend import (
    OrtQuantization, module_name, ort_quantization, quantized_layers, run_saved, save_int8)
from mluverify.report.records import ShardWriter
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)

INT8 = Target("ort", "int8")


def _verify(pipeline: Pipeline, model, *args, target: Target = INT8, **options):
    return run_case(pipeline, target, model, *args, **options)


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


def _int8_weights(path: Path) -> np.ndarray:
    """Every int8 weight of a saved QDQ model (the initializers its DequantizeLinear nodes read)."""
    graph = onnx.load(str(path)).graph
    weights = [onnx.numpy_helper.to_array(i) for i in graph.initializer if i.data_type == onnx.TensorProto.INT8]
    return np.concatenate([w.ravel() for w in weights])


@pytest.mark.parametrize("vnni", [True, False])
def test_weights_take_seven_bits_on_a_cpu_without_vnni(ort_available, pipeline, tmp_path, monkeypatch, vnni):
    # without VNNI, x86 sums u8 x s8 pairs into saturating int16: onnxruntime's remedy is reduce_range
    monkeypatch.setattr("mluverify.plugins.ort_int8_backend.has_vnni", lambda: vnni)
    weights = _int8_weights(save_int8(cnn(), (images(),), tmp_path / "cnn.int8.onnx"))
    assert np.abs(weights).max() == (127 if vnni else 64)  # symmetric: [-64, 64] in 7 bits
    row = _verify(pipeline, cnn(), images()).record.as_row()
    assert row["device_impl"].endswith("(2 sample(s))" if vnni else "this CPU has no VNNI: 8 would saturate its int16 sums)")


def test_vnni_is_read_from_the_cpus_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse avx2 fma\n")
    assert not has_vnni(str(cpuinfo))
    cpuinfo.write_text("flags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert has_vnni(str(cpuinfo))
    assert has_vnni(str(tmp_path / "none"))  # no file: taken to have it (the runtimes' defaults)


def test_module_names_are_read_from_the_exporters_scopes():
    assert module_name("/fn/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1"
    assert module_name("/fn/layer2/layer2.0/downsample/downsample.0/Conv") == "layer2.0.downsample.0"
    assert module_name("/fn/fn.0/Conv") == "0"
    assert module_name("/fn/fc/Gemm") == "fc"
    # quant_pre_process fuses a MatMul and its bias Add into a Gemm named after the MatMul
    assert module_name("/fn/head/MatMul/MatMulAddFusion") == "head"
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


class _Unexportable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.cummax(self.conv(x), dim=1).values


def test_a_model_the_exporter_cannot_export_errors_with_its_message(ort_available, pipeline):
    with pytest.raises(BackendError, match=r"torch.onnx.export failed: .*aten::cummax"):
        _verify(pipeline, _Unexportable(), images())



def test_a_failed_shape_inference_leaves_the_working_directory_as_it_was(ort_available, pipeline, tmp_path,
                                                                         monkeypatch):
    """onnxruntime's quant_pre_process saves the model it could not infer the shapes of into the
    working directory (found by the zoo: MixNet's same-padded mixed convolutions)."""
    timm = pytest.importorskip("timm", reason="a model whose shapes onnxruntime cannot infer: mluverify[zoo]")
    working = tmp_path / "working"
    working.mkdir()
    monkeypatch.chdir(working)
    with pytest.raises(BackendError, match="quant_pre_process failed: Exception: Incomplete symbolic shape inference"):
        _verify(pipeline, timm.create_model("tf_mixnet_s").eval(), torch.randn(1, 3, 64, 64))
    assert list(working.iterdir()) == []

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
