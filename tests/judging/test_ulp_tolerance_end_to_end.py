"""A run judged by ULPs: a config tolerance on ``ulp_max`` makes the run compute the golden result,
the records keep the ULPs, the raw rel_mse and the resolved tolerance; without one, no ULPs."""
import math

import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq

SUITE = """
import torch

def test_exp(verify):
    verify(torch.exp, torch.tensor([0.5, 1.0, 2.0]), op="exp")

def test_neg(verify):
    verify(torch.neg, torch.tensor([0.5, 1.0, 2.0]), op="neg")
"""


def test_a_config_ulp_tolerance_is_judged_against_the_golden_result_and_recorded(pytester):
    pytester.makepyfile(test_ulp=SUITE)
    pytester.makepyprojecttoml('[tool.mluverify.tolerances]\nexp = { metric = "ulp_max", bound = 0.5 }\n')
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=cpu64:eager",
                                           f"--mlu-report={pytester.path / 'run'}")
    result.assert_outcomes(passed=2)
    records = pq.read_table(pytester.path / "run" / "records.parquet").to_pandas().set_index("op")
    exp, neg = records.loc["exp"], records.loc["neg"]
    # cpu64 computes in float64, rounded to float32: correctly rounded, so at most 0.5 ULP
    assert exp["metric"] == "ulp_max" and 0 <= exp["value"] <= 0.5 and exp["ulp_max"] == exp["value"]
    assert (exp["tolerance_metric"], exp["tolerance_bound"], exp["tolerance_source"]) == ("ulp_max", 0.5, "config:exp::")
    # neg is judged by its policy and asked for no golden result: no ULPs (null, not 0)
    assert neg["metric"] == "rel_mse" and math.isnan(neg["ulp_max"]) and neg["tolerance_source"].startswith("policy:")
    assert neg["raw_rel_mse"] == 0.0 and neg["eps_zeroed"] == False  # noqa: E712 (a numpy bool)
