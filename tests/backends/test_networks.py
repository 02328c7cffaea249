"""The networks of today (GPT decoder, BERT encoder, ViT-B/16, MobileNetV3) from the network
suite, float32 on the emulated MLU layer by layer and fused: every case within its bound, and
the transformer blocks fused whole on ``mlu:cnml``."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest

REPO = Path(__file__).resolve().parents[2]
NETWORKS = ("gpt_decoder", "bert_encoder", "vit_b_16_small", "mobilenet_v3_large_small")
TRANSFORMERS = ("gpt_decoder", "bert_encoder", "vit_b_16_small")

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # end to end, seconds a test: make test-e2e


def test_networks_of_today_pass_on_the_mlu_and_transformers_fuse_whole(pytester, tmp_path):
    result = pytester.runpytest_subprocess(
        "-p", "mluverify", f"{REPO / 'suites/networks/test_networks.py'}::test_network", "--rootdir", str(REPO),
        "-c", str(REPO / "pyproject.toml"), "-k", f"float32 and ({' or '.join(NETWORKS)})",
        "--mlu-target", "mlu:cnnl", "--mlu-target", "mlu:cnml", "--mlu-core-version", "MLU270",
        "--mlu-report", str(tmp_path / "run"),
        "-p", "no:cacheprovider", "-q")
    every = pd.read_parquet(tmp_path / "run" / "records.parquet")
    assert (every.status == "passed").all(), every.loc[every.status != "passed", ["case_id", "reason"]].to_string()
    # a network split into several fusion groups (MobileNetV3) also has one record per group output;
    # every fused network one per group call for the value inside it furthest from the CPU ("Group0.bmm_2")
    groups = every[every.kind == "group"]
    inner = groups.leaf.str.match(r"MLUFusionGroup\d+\.")
    assert set(groups.loc[~inner, "op"]) <= {"mobilenet_v3_large_small"}
    assert set(groups.loc[inner, "op"]) == set(NETWORKS) and set(groups.target) == {"mlu:cnml"}
    records = every[every.kind == "output"]
    assert sorted(zip(records.op, records.target)) == sorted((n, t) for n in NETWORKS for t in ("mlu:cnnl", "mlu:cnml"))
    fused = records[records.target == "mlu:cnml"].set_index("op")
    assert (fused.loc[list(TRANSFORMERS), "executed_as"] == "fused").all(), fused[["executed_as", "not_fused_reason"]]
    assert (fused.loc[list(TRANSFORMERS), "fallback_ops"] == "").all()
    result.assert_outcomes(passed=len(records))  # one test per output record
