"""The suites catch subtly wrong device kernels, and the clean device passes the same subset.

``planted_plugin`` overrides five kernels (dropped bias in addmm and conv, a scale error in
softmax and mul: 1 % layer by layer, 6 % fused, an off-by-one max-pool window). A subset of the
op, OpInfo and network suites runs on ``mlu:cnnl`` (layer by layer) and ``mlu:cnml`` (fused:
the groups run the device's kernels) in subprocesses, once clean and once with
``-p planted_plugin``; every planted op must show up among the failing records of each suite and
of each target, and the clean run must have none.

Only cases that ran as their target means count: a ``mlu:cnml`` case that could not run fused
(status ``not_fused``) runs layer by layer, and an op that ran on the CPU (``not_on_device``)
ran no device kernel; those statuses are provenance, judged by the gate, not numerics.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).with_name("planted_plugin.py")

# suite path, -k expression: each planted op is exercised by more than one suite.
SUBSET = (
    ("suites/ops/test_matmul.py", "test_product and not outliers and (addmm or linear)"),
    ("suites/ops/test_conv.py", "test_conv and not outliers and conv2d"),
    ("suites/ops/test_reductions.py", "softmax"),
    ("suites/ops/test_elementwise.py", "test_binary_broadcast and mul"),
    ("suites/ops/test_pool.py", "test_pool and max_pool2d"),
    ("suites/networks/test_networks.py", "test_network and mnist_net and float32"),
    ("suites/opinfo/test_opinfo.py", "linear or conv2d or softmax or max_pool2d or mul"),
)
# planted kernel -> ops (records' ``op``) whose cases it must fail, in every suite running them
CAUGHT_AS = {
    "addmm": ("addmm", "linear", "nn.functional.linear"),
    "convolution_overrideable": ("conv2d", "nn.functional.conv2d"),
    "_softmax": ("softmax",),
    "mul.Tensor": ("mul",),
    "max_pool2d_with_indices": ("max_pool2d", "nn.functional.max_pool2d"),
}
NETWORK = "mnist_net"  # conv, linear and max-pool: planted bugs in three of its kernels
TARGETS = ("mlu:cnnl", "mlu:cnml")
PROVENANCE = ("not_fused", "not_on_device")  # ran, but not as the target says: not judged here

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # end to end, seconds a test: make test-e2e


def _run_subset(pytester: pytest.Pytester, report: Path, *plugins: str) -> pd.DataFrame:
    """One pytest process over every (suite file, -k) pair of SUBSET: the file's name joins
    its keywords, so each expression selects only in its own file."""
    shutil.copy(PLUGIN, pytester.path / PLUGIN.name)
    keyword = " or ".join(f"({Path(path).name} and ({words}))" for path, words in SUBSET)
    pytester.runpytest_subprocess(
        "-p", "mluverify", *plugins, *(str(REPO / path) for path, _ in SUBSET), "-k", keyword,
        "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), *(f"--mlu-target={t}" for t in TARGETS),
        "--mlu-core-version", "MLU270", "--mlu-report", str(report), "-p", "no:cacheprovider", "-q",
    )
    return pd.read_parquet(report / "records.parquet")


def _judged(records: pd.DataFrame) -> pd.DataFrame:
    return records[~records.status.isin(PROVENANCE)]


def test_planted_kernels_are_caught(pytester: pytest.Pytester, tmp_path: Path) -> None:
    records = _run_subset(pytester, tmp_path, "-p", "planted_plugin")
    judged = _judged(records)
    # Every suite catches each planted kernel (on mlu:cnml the OpInfo suite runs one sample an
    # entry, which need not touch the planted defect: a max-pool window one wider may keep the max).
    missed = [(kernel, suite) for kernel, ops in CAUGHT_AS.items()
              for suite, cases in judged[judged.op.isin(ops)].groupby("suite")
              if not (cases.status == "failed").any()]
    assert not missed, f"planted bugs not caught (kernel, suite): {missed}"
    # ... and each target catches each planted kernel, in one suite or more.
    caught_on = {(kernel, target) for kernel, ops in CAUGHT_AS.items()
                 for target in judged.loc[judged.op.isin(ops) & (judged.status == "failed"), "target"]}
    assert caught_on == {(kernel, target) for kernel in CAUGHT_AS for target in TARGETS}, sorted(caught_on)
    assert set(records.suite) == {"ops", "opinfo", "networks"} and set(records.target) == set(TARGETS)
    # The float network runs the planted kernels (its quantized variants run the quantization
    # tool's own conv / linear kernels instead).
    network = judged[(judged.op == NETWORK) & (judged.quant.fillna("") == "")]
    assert set(network.target) == set(TARGETS) and (network.status == "failed").all()
    assert not (records.status == "errored").any(), "planted bugs must fail as mismatches, not crashes"


@pytest.mark.heavy  # the control; make gate (CI) also runs the whole default suites on the clean device
def test_clean_device_passes_the_same_subset(pytester: pytest.Pytester, tmp_path: Path) -> None:
    records = _run_subset(pytester, tmp_path)
    judged = _judged(records)
    for target in TARGETS:  # every planted kernel's ops (and the network) ran as the target says
        ran = set(judged.loc[judged.target == target, "op"])
        unexercised = [kernel for kernel, ops in CAUGHT_AS.items() if not ran & set(ops)]
        assert not unexercised and NETWORK in ran, (target, unexercised)
    assert len(judged) > 100
    assert (judged.status == "passed").all(), judged.loc[judged.status != "passed", ["case_id", "reason"]].to_string()
