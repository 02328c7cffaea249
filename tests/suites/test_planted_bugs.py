"""The suites catch subtly wrong device kernels, and the clean device passes the same subset.

``planted_plugin`` overrides five kernels (dropped bias in addmm and conv, a 1 % scale error in
softmax and mul, an off-by-one max-pool window). A subset of the op, OpInfo and network suites
runs on ``mlu:cnnl`` in subprocesses, once clean and once with ``-p planted_plugin``; every
planted op must show up among the failing records, and the clean run must have none.
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
    ("suites/ops/test_matmul.py", "test_product and (addmm or linear)"),
    ("suites/ops/test_conv.py", "test_conv and conv2d"),
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

pytestmark = pytest.mark.slow


def _run_subset(pytester: pytest.Pytester, report: Path, *plugins: str) -> pd.DataFrame:
    shutil.copy(PLUGIN, pytester.path / PLUGIN.name)
    for path, keyword in SUBSET:
        pytester.runpytest_subprocess(
            "-p", "mluverify", *plugins, str(REPO / path), "-k", keyword, "--rootdir", str(REPO),
            "-c", str(REPO / "pyproject.toml"), "--mlu-target", "mlu:cnnl",
            "--mlu-report", str(report / Path(path).stem), "-p", "no:cacheprovider", "-q",
        )
    return pd.concat([pd.read_parquet(p) for p in sorted(report.glob("*/records.parquet"))])


def test_planted_kernels_are_caught(pytester: pytest.Pytester, tmp_path: Path) -> None:
    records = _run_subset(pytester, tmp_path, "-p", "planted_plugin")
    missed = [(kernel, suite) for kernel, ops in CAUGHT_AS.items()
              for suite, cases in records[records.op.isin(ops)].groupby("suite") if cases.passed.all()]
    assert not missed, f"planted bugs not caught (kernel, suite): {missed}"
    assert set(records.suite) == {"ops", "opinfo", "networks"}
    assert not records.loc[records.op == NETWORK, "passed"].any()
    assert (records.loc[~records.passed, "error"] == "").all(), "planted bugs must fail as mismatches, not crashes"


def test_clean_device_passes_the_same_subset(pytester: pytest.Pytester, tmp_path: Path) -> None:
    records = _run_subset(pytester, tmp_path)
    exercised = {op for ops in CAUGHT_AS.values() for op in ops} | {NETWORK}
    assert exercised <= set(records.op) and len(records) > 100, sorted(set(records.op))
    assert records.passed.all(), records.loc[~records.passed, ["case_id", "reason"]].to_string()
