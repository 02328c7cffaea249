"""What both real int8 runtimes (``ort:int8``: onnxruntime's quantizer, ``openvino:int8``: NNCF and
the CPU plugin) must do alike, each test run on both: the small CNN within the ``cnml`` bound and
really quantized, the calibration set deciding the ranges, a planted outlier found as the worst
layer and kept in float, the shared checks on calibration samples and layer names, and the cases
int8 refuses. What is genuinely one runtime's (its options, its saved model, its exporter's
failures) stays in ``test_ort_int8.py`` / ``test_openvino_int8.py``.

Each runtime skips with its install line where it cannot run (fails under ``CI=true`` where
installed but unusable): the fixtures ``ort_available`` and ``openvino_int8``.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Callable

import pytest
import torch
from torch import nn

from int8_models import ShapeOfFirst, check_refusals, cnn, images, openvino_int8, run_case, with_outlier  # noqa: F401

from mluverify.core.backends import Backend
from mluverify.core.calibration import calibrating_on
from mluverify.core.case import Case, Target
from mluverify.errors import InvalidArgument
from mluverify.plugins import openvino_int8_backend, ort_int8_backend
from mluverify.plugins._int8 import has_vnni
from mluverify.plugins.openvino_backend import OpenVinoBackend
from mluverify.plugins.ort_backend import OrtBackend
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)


@dataclass(frozen=True)
class Runtime:
    """What the shared tests need of one real int8 runtime."""

    target: Target
    available: str  # the fixture that skips (or fails under CI) where the runtime cannot run
    backend: Callable[[], Backend]
    quantization: Callable[..., Any]  # its context: ``with quantization(**options): verify(...)``
    layer_errors: Callable[..., Any]
    convolution: str  # what its layer table calls a convolution
    describes: Callable[[], str]  # the record's words for the default quantization of the CNN


RUNTIMES = (
    Runtime(Target("ort", "int8"), "ort_available", OrtBackend, ort_int8_backend.ort_quantization,
            ort_int8_backend.layer_errors, "Conv",
            lambda: "int8: quantize_static QDQ s8s8 per-tensor, calibrated on the case's inputs (2 sample(s))"),
    Runtime(Target("openvino", "int8"), "openvino_int8", OpenVinoBackend, openvino_int8_backend.openvino_quantization,
            openvino_int8_backend.layer_errors, "Convolution",
            lambda: (f"openvino {version('openvino')} CPU int8: nncf {version('nncf')} nncf.quantize performance "
                     f"per-channel, calibrated on the case's inputs (2 sample(s)); 3 layer(s) ran in int8")),
)
# Ranges 20x too wide, in 20 samples: as many as a per-channel scheme needs (19), so the default
# quantization of both runtimes takes it.
WIDE_CALIBRATION = tuple(images(seed) * 20 for seed in range(10))


@pytest.fixture(params=RUNTIMES, ids=[str(runtime.target) for runtime in RUNTIMES])
def runtime(request: pytest.FixtureRequest) -> Runtime:
    request.getfixturevalue(request.param.available)
    return request.param


def test_a_small_cnn_runs_in_int8_within_the_cnml_bound(runtime, pipeline):
    outcome = run_case(pipeline, runtime.target, cnn(), images())
    assert outcome.status == "passed", outcome.why
    row = outcome.record.as_row()
    assert row["quant"] == "int8" and row["target"] == str(runtime.target) and row["compile_s"] > 0
    assert runtime.describes() in row["device_impl"]
    # really quantized: an int8 error, far above the float run's of the same export on the cpu mode
    float_run = run_case(pipeline, Target(runtime.target.backend, "cpu"), cnn(), images(), quant="")
    assert outcome.verdict.value > 1e-4 > 100 * float_run.verdict.value


def test_the_calibration_set_decides_the_ranges(runtime, pipeline):
    own = run_case(pipeline, runtime.target, cnn(), images())
    with runtime.quantization(calibration=WIDE_CALIBRATION):
        wide = run_case(pipeline, runtime.target, cnn(), images())
    assert "calibrated on 10 batch(es), 20 sample(s)" in wide.record.as_row()["device_impl"]
    assert wide.verdict.value > 5 * own.verdict.value  # coarser steps
    case = Case(f"t[{runtime.target}]", "cnn", runtime.target, quant="int8")
    with calibrating_on(list(WIDE_CALIBRATION), case, runtime.backend()):  # what verify(..., calibration=) sets
        from_verify = run_case(pipeline, runtime.target, cnn(), images())
    assert from_verify.verdict.value == wide.verdict.value


def test_a_planted_outlier_is_the_worst_layer_and_fails_while_keeping_it_float_passes(runtime, pipeline):
    planted = with_outlier(cnn())
    # in [0, 1), as images are (on normal inputs, openvino:int8 with the head kept in float still
    # fails the cnml bound)
    pixels = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with runtime.quantization(granularity="per-tensor"):  # one scale for the head: the outlier's step swallows it
        errors = runtime.layer_errors(planted, pixels).set_index("layer")
        failed = run_case(pipeline, runtime.target, planted, pixels)
    assert list(errors.index) == ["0", "2", "4"] and list(errors["type"]) == [runtime.convolution] * 3
    assert errors["rel_mse"].idxmax() == "4"
    assert errors.loc["4", "rel_mse"] > 0.02 > errors.loc["2", "rel_mse"]
    assert failed.status == "failed"
    with runtime.quantization(granularity="per-tensor", exclude=("4",)):
        kept = run_case(pipeline, runtime.target, planted, pixels)
        assert list(runtime.layer_errors(planted, pixels)["layer"]) == ["0", "2"]
    assert kept.verdict.value < 0.7 * failed.verdict.value
    # 7-bit weights (a CPU without VNNI) double the step: the two layers left then sit at 0.0227
    assert kept.status == "passed" or not has_vnni(), kept.verdict
    assert "1 layer(s) in float" in kept.record.as_row()["device_impl"]


def test_a_per_channel_scheme_says_how_many_calibration_samples_it_needs(runtime, pipeline):
    with runtime.quantization(granularity="per-channel", calibration=(images(),)), \
            pytest.raises(InvalidArgument, match=rf"{runtime.target} per-channel quantization needs at least 19 "
                                                  r"calibration samples, the calibration set has 2: give 17 more, "
                                                  r"or granularity='per-tensor'"):
        run_case(pipeline, runtime.target, cnn(), images())
    enough = tuple(torch.randn(2, 3, 16, 16) for _ in range(10))  # batches of the exported shape
    with runtime.quantization(granularity="per-channel", calibration=enough):
        assert run_case(pipeline, runtime.target, cnn(), images()).status == "passed"


def test_a_layer_not_in_the_model_names_it_and_the_layers(runtime, pipeline):
    with runtime.quantization(exclude=("conv9",)), pytest.raises(InvalidArgument, match=r"'conv9'.*'0', '2', '4'"):
        run_case(pipeline, runtime.target, cnn(), images())


class _TokenClassifier(nn.Module):
    """An embedding of int64 token ids, masked by an int64 attention mask, and a linear head: a
    language model's inputs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding, self.head = nn.Embedding(50, 16), nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(ids) * mask.unsqueeze(-1).float())


def test_a_model_of_integer_token_ids_calibrates_and_runs_on_them_as_integers(runtime, pipeline):
    # found by the zoo (every Hugging Face model): the ids reached the quantizer and the int8 model
    # as float32, which an int64 input refuses
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 12, dtype=torch.int64)
    outcome = run_case(pipeline, runtime.target, _TokenClassifier().eval(), ids, mask)
    assert 1e-6 < outcome.verdict.value < 0.5  # judged, and the head really ran in int8
    assert list(runtime.layer_errors(_TokenClassifier().eval(), (ids, mask))["layer"]) == ["head"]


def test_a_model_that_drops_an_input_it_never_reads_is_judged_as_the_model_without_it(runtime, pipeline):
    # the exported models keep only the inputs their programs read; calibration, the run and the
    # per-layer reads once fed them every argument (onnxruntime: "Invalid input name: input0"; NNCF:
    # the second argument given to the model's only input)
    like, x = torch.zeros(2), images()
    dropped = run_case(pipeline, runtime.target, ShapeOfFirst(), like, x).record.as_row()
    plain = run_case(pipeline, runtime.target, cnn(), x).record.as_row()
    assert dropped["error"] == "" and plain["error"] == ""
    assert (dropped["status"], dropped["value"]) == (plain["status"], plain["value"])
    assert list(runtime.layer_errors(ShapeOfFirst(), (like, x))["layer"]) == ["body.0", "body.2", "body.4"]


def test_a_convolution_with_folded_batch_norm_is_a_layer_of_its_own(runtime, pipeline):
    # found by the zoo (MobileNetV2): OpenVINO's converter folds a batch norm into its convolution
    # and renames it, and openvino:int8 looked the layer's output up among NNCF's weight constants
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
                          nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
                          nn.Conv2d(8, 10, 1)).eval()
    errors = runtime.layer_errors(model, images())
    # (openvino:int8 names a folded convolution after the Multiply it absorbed: no module to read)
    assert len(errors) == 3 and errors["layer"].iloc[-1] == "6" and errors["type"].str.contains(runtime.convolution).all()
    assert errors["rel_mse"].between(1e-6, 0.1).all(), errors  # each layer's own int8 error, none a mismatch
    assert 1e-6 < run_case(pipeline, runtime.target, model, images()).verdict.value < 0.1


class _Attention(nn.Module):
    """Attention's scores: a matmul of two activations, beside the projections' weighted ones."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.query, self.key = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(self.query(x), self.key(x).transpose(1, 2))


def test_a_matmul_of_two_activations_is_a_layer_named_by_its_node(runtime, pipeline):
    # found by the zoo (every transformer): openvino:int8 looked the scores' matmul up among the
    # layers with a weight
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(3))
    errors = runtime.layer_errors(_Attention().eval(), x)
    assert {"query", "key"} <= set(errors["layer"]) and len(errors) >= 2
    assert errors["rel_mse"].between(1e-6, 0.1).all(), errors
    assert 1e-6 < run_case(pipeline, runtime.target, _Attention().eval(), x).verdict.value < 0.2


def test_cases_int8_does_not_run_as_asked_are_refused(runtime, pipeline):
    check_refusals(pipeline, runtime.target, Target(runtime.target.backend, "cpu"))
