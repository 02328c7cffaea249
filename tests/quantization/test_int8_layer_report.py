"""The per-layer view of the real int8 runtimes (``ort:int8``, ``openvino:int8``) in the run's
records and in dump-diff: a planted 300x outlier in the head's weights is the layer recorded with
the largest error, and ``mluverify dump-diff`` on the case's ``--mlu-dump=fail`` dump names it first.

Skipped with the install line where a runtime is missing (``ort_available``, ``openvino_int8``).
"""
from __future__ import annotations

import pytest

from int8_models import cnn, images, run_case, with_outlier

from mluverify import hookimpl
from mluverify.cli import main
from mluverify.core.case import Target
from mluverify.core.config import Settings
from mluverify.core.pipeline import Pipeline
from mluverify.core.plugin_manager import new_plugin_manager
from mluverify.dump import dump_case, dump_diff
from mluverify.report.records import ShardWriter
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)
from tests.quantization.test_openvino_int8 import openvino_int8  # noqa: F401  (the same for openvino / nncf)

HEAD = "4"  # the planted layer: the model's 1x1 conv head (int8_models.with_outlier)
TARGETS = [pytest.param("ort:int8", "ort_available", id="ort"),
           pytest.param("openvino:int8", "openvino_int8", id="openvino")]


@pytest.fixture
def dumping_pipeline(tmp_path) -> Pipeline:
    """A pipeline that dumps every failing case as ``--mlu-dump=fail`` does."""
    return Pipeline(new_plugin_manager(entry_points=False), Settings(), tmp_path / "run", ShardWriter,
                    dump_case=dump_case)


def _layer_records(pipeline: Pipeline, target: str, model) -> tuple[dict, dict[str, dict]]:
    """The case's output record and its layer records (kind ``group``) by layer name."""
    rows: list[dict] = []
    pipeline.pm.register(_Collector(rows))
    run_case(pipeline, Target(*target.split(":")), model, images())
    output = next(row for row in rows if row["kind"] == "output")
    return output, {row["leaf"].split("[")[0]: row for row in rows if row["kind"] == "group"}


class _Collector:
    """Keeps every record the pipeline writes (the ``mluverify_record`` hook)."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    @hookimpl
    def mluverify_record(self, record: dict) -> None:
        self.rows.append(record)


@pytest.mark.parametrize(("target", "available"), TARGETS)
def test_the_planted_layer_is_recorded_with_the_largest_error_and_dump_diff_names_it_first(
        target, available, request, dumping_pipeline, capsys):
    request.getfixturevalue(available)
    output, layers = _layer_records(dumping_pipeline, target, with_outlier(cnn()))
    # every quantized conv is a record of its own, the planted head the worst and over the bound
    assert sorted(layers) == ["0", "2", HEAD]
    assert max(layers, key=lambda name: layers[name]["value"]) == HEAD
    assert not layers[HEAD]["passed"] and layers["0"]["passed"] and layers["2"]["passed"]
    assert "against the same node of the float model" in layers[HEAD]["reason"]
    # the head's output is the model's: its layer error, read from the runtime's intermediate
    # outputs against the float model's, is the case's output error against torch's eager CPU run
    assert layers[HEAD]["value"] == pytest.approx(output["value"], rel=1e-3)
    assert output["status"] == "failed"

    dumped = dumping_pipeline.run_dir / output["reproducer"].split("dump: ")[1]
    diff = dump_diff(dumped)
    assert list(diff.groups["group"]) == ["0", "2", HEAD]  # in graph order, the planted one first to break
    assert diff.first_group["group"] == HEAD and diff.verdict == "blamed"
    assert diff.first_group["own_value"] == pytest.approx(layers[HEAD]["value"], rel=1e-6)
    assert main(["dump-diff", str(dumped)]) == 1
    headline = capsys.readouterr().out
    assert f"first offender: fusion group {HEAD} output 0" in headline
    assert "against the same node of the float model" in headline and "own graph" not in headline


@pytest.mark.parametrize(("target", "available"), TARGETS)
def test_a_clean_model_records_every_layer_within_the_bound(target, available, request, dumping_pipeline):
    request.getfixturevalue(available)
    output, layers = _layer_records(dumping_pipeline, target, cnn())
    assert sorted(layers) == ["0", "2", HEAD] and all(row["passed"] for row in layers.values())
    assert all(row["value"] > 0 for row in layers.values())  # really quantized: each layer has its own error
    assert output["status"] == "passed" and "dump:" not in output["reproducer"]


def test_a_failing_cnml_int8_case_is_dumped_keeping_its_verdict(dumping_pipeline):
    """mlu:cnml quantizes on the host (layers built on the meta device, calibration passes on
    the CPU): no device work, unseen by the Dumper when ``--mlu-dump=fail`` re-runs the case (it
    indexed the meta tensors, raised, and the case lost its verdict: the zoo's int8 runs)."""
    output, layers = _layer_records(dumping_pipeline, "mlu:cnml", with_outlier(cnn()))
    assert output["status"] == "failed"
    dumped = dumping_pipeline.run_dir / output["reproducer"].split("dump: ")[1]
    assert dump_diff(dumped).verdict == "blamed"
