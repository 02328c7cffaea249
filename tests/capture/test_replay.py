"""`pytest -p mluverify --mlu-cases DIR`: captured cases replayed on the emulated MLU's targets,
judged and recorded like any case; a planted wrong kernel is caught on the captured op."""
import json
import os

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest
import torch

from mluverify.cli import main
from mluverify.dump import capture
from mluverify.dump._cases import META_KEY

from small_model import small_net

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e

pytest.importorskip("mluverify.device")

TARGETS = ("--mlu-target=mlu:cnnl", "--mlu-target=mlu:cnml")
NAMES = ["convolution-1", "relu-1", "convolution-2", "view-1", "t-1", "addmm-1"]

# A third-party kernel plugin: relu 1 % too large layer by layer (3x the cnnl bound of 0.3 %),
# 6 % in the fused engine (3x the cnml bound of 2 %; fused groups run each op's cnml kernel).
PLANTED_RELU = """
import torch
from mluverify import hookimpl

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::relu", lambda x: torch.relu(x) * 1.01, mode="cnnl")
    registry.register("aten::relu", lambda x: torch.relu(x) * 1.06, mode="cnml")
"""


@pytest.fixture(scope="module")
def small_cases(tmp_path_factory):
    """The small model's six cases, the first one's inputs as real values, the rest recipes."""
    net, x = small_net()
    first_case_bytes = (1 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 4) * 4
    with torch.no_grad(), capture(tmp_path_factory.mktemp("capture") / "small",
                                  max_bytes=first_case_bytes) as c:
        net(x)
        net(x)
    return c.path


def run(pytester, cases, *args):
    return pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-cases={cases}",
                                         f"--mlu-report={pytester.path / 'run'}", "-rs", *args)


def records(pytester):
    return pq.read_table(pytester.path / "run" / "records.parquet").to_pandas()


@pytest.mark.heavy  # CI's make gate replays every shipped captured suite on both targets the same way
def test_every_case_replays_on_both_targets_and_is_recorded(pytester, small_cases):
    result = run(pytester, small_cases, *TARGETS)
    result.assert_outcomes(passed=12)
    frame = records(pytester).sort_values("case_id")
    assert sorted(frame["op"]) == sorted(["convolution", "relu", "convolution", "view", "t",
                                          "addmm"] * 2)
    assert set(frame["suite"]) == {"captured"} and set(frame["status"]) == {"passed"}
    assert sorted(frame["target"].unique()) == ["mlu:cnml", "mlu:cnnl"]
    names = {case_id.split("::")[1].split("[")[0] for case_id in frame["case_id"]}
    assert names == set(NAMES)
    shapes = dict(zip(frame["op"], frame["shape"]))  # of each op's first tensor argument
    assert (shapes["view"], shapes["t"], shapes["addmm"]) == ("1x4x8x8", "10x256", "10")
    assert all(case_id in reproducer for case_id, reproducer in
               zip(frame["case_id"], frame["reproducer"]))
    # the audit recommends a bound per captured op, target and dtype
    assert main(["audit", str(pytester.path / "run"), "--out", str(pytester.path / "audit")]) == 0
    audit = pandas.read_csv(pytester.path / "audit" / "audit.csv")
    assert sorted(set(zip(audit["op"], audit["target"]))) == sorted(
        (op, target) for op in ("addmm", "convolution", "relu", "t", "view")
        for target in ("mlu:cnml", "mlu:cnnl"))
    assert audit["recommended_bound"].notna().all()


def test_a_planted_wrong_kernel_is_caught_on_the_captured_op(pytester, small_cases):
    pytester.makepyfile(planted_relu=PLANTED_RELU)
    result = run(pytester, small_cases, *TARGETS, "-p", "planted_relu")
    result.assert_outcomes(passed=10, failed=2)
    result.stdout.fnmatch_lines(["*relu on mlu:cnnl*rel_mse*", "*relu on mlu:cnml*rel_mse*"])
    frame = records(pytester).set_index(["op", "target"])
    # rel_mse of a uniform relative error e is e
    assert frame.loc[("relu", "mlu:cnnl"), "rel_mse"] == pytest.approx(0.01, rel=1e-3)
    assert frame.loc[("relu", "mlu:cnml"), "rel_mse"] == pytest.approx(0.06, rel=1e-3)
    assert set(frame.loc["relu", "status"]) == {"failed"}
    assert set(frame.drop(index="relu", level="op")["status"]) == {"passed"}


def test_a_case_whose_inputs_cannot_be_rebuilt_errors_and_the_others_run(pytester, small_cases,
                                                                         tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("cases.parquet", "values.bin"):
        (broken / name).write_bytes((small_cases / name).read_bytes())
    # The sidecar loses its last bytes: the first convolution's bias (its last input).
    with open(broken / "values.bin", "r+b") as sidecar:
        sidecar.truncate(os.path.getsize(broken / "values.bin") - 8)
    result = run(pytester, broken, "--mlu-target=mlu:cnnl")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(["*convolution-1: inputs cannot be rebuilt:*values.bin holds 8 bytes"
                                 " at offset 1200, tensor bias needs 16*"])
    frame = records(pytester).set_index("op")
    errored = frame[frame["status"] == "errored"]
    assert len(errored) == 1 and "values.bin holds 8 bytes" in errored["error"].iloc[0]


def test_a_cases_file_of_another_version_stops_the_collection(pytester, small_cases, tmp_path):
    table = pq.read_table(small_cases / "cases.parquet")
    header = json.loads(table.schema.metadata[META_KEY])
    newer = tmp_path / "newer"
    newer.mkdir()
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps({**header, "version": 2})}),
                   newer / "cases.parquet")
    result = run(pytester, newer, "--mlu-target=mlu:cnnl")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*{newer / 'cases.parquet'}: cases schema version 2; this "
                                 f"mluverify reads version 1*"])


def test_a_missing_cases_path_is_a_usage_error(pytester, tmp_path):
    result = run(pytester, tmp_path / "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--mlu-cases {tmp_path / 'nowhere'}: no such cases directory*"])
