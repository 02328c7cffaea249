"""The zero-sum rule (``mluverify.judge.judge_zero_sum``): a bias gradient whose sum cancels (0
by symmetry: an attention key bias) below what the precision of its summands resolves is judged
by its distance from the float64 value relative to ``sqrt(summands) x`` the summed gradient's
norm, not by rel_mse against the CPU's rounding noise.
The judge alone on numbers derived by hand; the float64 run's scale against a layer whose output
gradient is known (the upstream gradient itself); end to end, an attention's key-bias gradient on
MLU370 passes by the rule and a softmax backward whose rows no longer sum to 0 fails it."""
from __future__ import annotations

import math

import numpy as np
import pandas  # noqa: F401  imported before pytester snapshots sys.modules, so it is loaded once
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

from mluverify.core.case import Case, Target
from mluverify.core.gradients import gradient_probe, summed_biases
from mluverify.judge import ZERO_SUM_METRIC, TermSum, Tolerance, compare, judge_zero_sum, policy

CNNL = policy("cnnl")  # rel_mse <= 0.003
NOISE = np.array([1e-12, -1e-12])  # a CPU float32 gradient of a sum that is 0: its own rounding


def _judged(actual: np.ndarray, golden: np.ndarray, scale: float, tolerance: Tolerance = CNNL):
    plain = compare(actual, NOISE, tolerance=tolerance)
    return plain, judge_zero_sum(plain, actual, TermSum(golden, 4, scale), tolerance, "float32")


def test_a_zero_gradient_is_judged_by_its_distance_from_float64_relative_to_the_scale():
    # scale 10, 4 summands: the bound lets |actual - golden| reach 10 x (0.003 + 3 x 2^-24) = 0.0300018
    golden = np.array([1e-16, -1e-16])
    plain, within = _judged(np.array([0.018, 0.024]), golden, 10.0)  # norm 0.03 - 2e-16
    assert not plain.passed  # against the CPU's noise any device value "fails"
    assert within.passed and within.metric == ZERO_SUM_METRIC
    assert within.value == pytest.approx(0.003) and within.bound == pytest.approx(0.003 + 3 * 2.0**-24)
    assert within.reason.startswith("the sum cancels: the float64 gradient's norm 1.41e-16 <= bound x scale 0.03")
    _, beyond = _judged(np.array([0.018, 0.0241]), golden, 10.0)  # norm sqrt(9.0481e-4) = 0.030080
    assert not beyond.passed and beyond.value == pytest.approx(0.0030080, rel=1e-4)


def test_a_gradient_beyond_what_its_summands_resolve_keeps_its_plain_verdict():
    # bound x scale = 0.03: a float64 gradient of norm 0.0316 is a value the summands resolve
    plain, judged = _judged(np.array([0.018, 0.024]), np.array([0.03, 0.01]), 10.0)
    assert judged is plain
    _, at_the_allowance = _judged(np.array([0.018, 0.024]), np.array([0.024, 0.018]), 10.0)  # norm 0.03
    assert at_the_allowance.metric == ZERO_SUM_METRIC and at_the_allowance.value == pytest.approx(0.006 * 2**0.5 / 10)


def test_the_rule_needs_a_rel_mse_bound_to_derive_its_own():
    golden = np.zeros(2)
    for tolerance in (Tolerance("max_abs", 1e-3), policy("golden")):
        plain, judged = _judged(np.array([0.018, 0.024]), golden, 10.0, tolerance=tolerance)
        assert judged is plain


def _probe_sums(module: nn.Module, x: torch.Tensor):
    case = Case("case", "op", Target.parse("mlu:cnnl"), seed=0)
    probe = gradient_probe(module, case, None, (x,), {})
    upstream = probe.upstream((x,), {})
    return upstream, summed_biases(probe, upstream, (x,), {})


def test_the_scale_is_sqrt_summands_times_the_norm_of_the_layer_output_gradient():
    torch.manual_seed(0)
    linear, x = nn.Linear(3, 2), torch.randn(5, 3)
    (u,), (sums, note) = _probe_sums(linear, x)
    # the output is the probe's output, so its gradient is the upstream gradient u
    assert note == "" and set(sums) == {"bias.grad"}
    assert sums["bias.grad"].terms == 5
    assert sums["bias.grad"].scale == pytest.approx(math.sqrt(5) * float(u.double().norm()), rel=1e-12)
    assert torch.allclose(sums["bias.grad"].golden, u.double().sum(0), rtol=1e-12, atol=0)


def test_a_layer_called_twice_counts_both_calls_summands():
    torch.manual_seed(1)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(2, 2, 1)

        def forward(self, x):
            return torch.cat([self.conv(x), self.conv(x[:, :, :3])], -1)

    (u,), (sums, _) = _probe_sums(Twice(), torch.randn(4, 2, 6))
    # per channel: 4 x 6 positions of the first call, 4 x 3 of the second
    assert sums["conv.bias.grad"].terms == 36
    assert sums["conv.bias.grad"].scale == pytest.approx(6.0 * float(u.double().norm()), rel=1e-12)


ATTENTION = """
import math, torch, torch.nn as nn

class Attention(nn.Module):
    '''Single-head self-attention with biased projections, as BERT's and ViT's.'''
    def __init__(self, width=16):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        scores = self.query(x) @ self.key(x).transpose(-1, -2) / math.sqrt(x.shape[-1])
        return torch.softmax(scores, -1) @ self.value(x)

def test_attention(verify):
    torch.manual_seed(0)
    verify(Attention(), torch.randn(2, 8, 16), op="attention", grad=True)
"""

# The weighted row mean subtracted 10 % short: each row of the result sums to 0.1 x that mean, not 0
ROWS_OFF = """
from mluverify import hookimpl

def _softmax_backward_rows_off(grad_output, output, dim, input_dtype):
    return output * (grad_output - 0.9 * (grad_output * output).sum(dim, keepdim=True))

@hookimpl
def mluverify_device_kernels(registry):
    registry.register("aten::_softmax_backward_data", _softmax_backward_rows_off)
"""


def _key_bias(pytester, *plugin: str) -> pandas.Series:
    report = pytester.path / ("planted" if plugin else "clean")
    pytester.runpytest_subprocess("-p", "mluverify", *plugin, f"--mlu-report={report}", "--mlu-target=mlu:cnnl",
                                  "--mlu-core-version=MLU370", "-p", "no:cacheprovider", "-p", "no:randomly")
    return pq.read_table(report / "records.parquet").to_pandas().set_index("leaf").loc["key.bias.grad"]


@pytest.mark.slow
def test_an_attention_key_bias_passes_by_the_rule_and_a_softmax_backward_bug_fails_it(pytester):
    pytester.makepyfile(test_attention=ATTENTION, rows_off=ROWS_OFF)
    clean = _key_bias(pytester)
    assert clean.status == "passed" and clean.metric == ZERO_SUM_METRIC
    # against the CPU's float32 noise the same device value is off by rel_mse ~0.07
    assert clean.rel_mse > 0.003 and clean.value < 0.001
    assert "the sum cancels" in clean.reason
    planted = _key_bias(pytester, "-p", "rows_off")
    assert planted.status == "failed" and planted.metric == ZERO_SUM_METRIC and planted.value > 0.006
