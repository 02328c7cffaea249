"""Recurrent layers: LSTM and GRU modules (1-2 layers, uni- and bidirectional, batch-first or
not) with random seeded weights, outputs and final states judged."""
from __future__ import annotations

import hypothesis
import pytest
import torch
from hypothesis import given, strategies as st

from mluverify.strategies import search_score, tensors

RECURRENT = (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU))
# The gates are products, which MLU270 quantizes per tensor (int16 by default): inputs with 1000x
# outliers leave the rest a coarse step, up to ~0.4 % rel_mse (above cnnl's 0.3 %; docs/device.md
# "Numerics"). The ordinary cases draw normal values; the outlier cases run apart, waived. On
# mlu:cnml the gates themselves are judged too (the value inside the fused group furthest from
# its graph on the CPU): a gate chunk of small values is up to 12 % off before the sigmoid and
# tanh damp it.
OUTLIERS_WAIVER = pytest.mark.mlu_waiver(
    "per-tensor int16 quantization (MLU270's default) of gate inputs with 1000x outliers: up to ~0.8 % rel_mse "
    "(3.5 % under the audit profile's search) > cnnl 0.3 % at the outputs, up to 12 % at the gates inside a fused "
    "group", "2027-06-30", category="quantization",
    # ceilings per record kind: an output's, its worst (3.53 %, a GRU on mlu:cnnl, found by the audit
    # profile's search; 0.79 % in the ci profile) x 1.4; a fused group's inner value's, its worst (11.85 %,
    # a fused GRU's gate chunk, ci profile) x 1.5. One 0.18 for both would let a 10 % output error pass.
    max=0.05, max_by_kind={"group": 0.18})


def _recurrent_case(verify, name: str, layer_type: type, dtype: str, data, distribution: str) -> None:
    input_size, hidden_size = data.draw(st.integers(1, 16), label="input"), data.draw(st.integers(1, 16), label="hidden")
    layers, bidirectional = data.draw(st.integers(1, 2), label="layers"), data.draw(st.booleans(), label="bidirectional")
    batch_first = data.draw(st.booleans(), label="batch_first")
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weight_seed"))
    layer = layer_type(input_size, hidden_size, layers, batch_first=batch_first, bidirectional=bidirectional).eval()
    sequence, batch = data.draw(st.integers(1, 7), label="sequence"), data.draw(st.integers(1, 3), label="batch")
    x = data.draw(tensors((sequence, batch, input_size), distributions=(distribution,), grid=dtype), label="x")
    verdict = verify(layer, x, op=name, dtype=dtype)
    hypothesis.target(search_score(verdict.diagnostics, verdict.value), label=f"raw_rel_mse:{name}:{dtype}")


@pytest.mark.parametrize("name, layer_type", RECURRENT, ids=[name for name, _ in RECURRENT])
@given(data=st.data())
def test_recurrent(verify, name: str, layer_type: type, dtype: str, data) -> None:
    _recurrent_case(verify, name, layer_type, dtype, data, "normal")


@OUTLIERS_WAIVER
@pytest.mark.parametrize("name, layer_type", RECURRENT, ids=[name for name, _ in RECURRENT])
@given(data=st.data())
def test_recurrent_with_outliers(verify, name: str, layer_type: type, dtype: str, data) -> None:
    _recurrent_case(verify, name, layer_type, dtype, data, "outliers")
