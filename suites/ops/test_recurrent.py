"""Recurrent layers: LSTM and GRU modules (1-2 layers, uni- and bidirectional, batch-first or
not) with random seeded weights, outputs and final states judged."""
from __future__ import annotations

import hypothesis
import pytest
import torch
from hypothesis import given, strategies as st

from mluverify.strategies import tensors

RECURRENT = (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU))


@pytest.mark.parametrize("name, layer_type", RECURRENT, ids=[name for name, _ in RECURRENT])
@given(data=st.data())
def test_recurrent(verify, name: str, layer_type: type, dtype: str, data) -> None:
    input_size, hidden_size = data.draw(st.integers(1, 16), label="input"), data.draw(st.integers(1, 16), label="hidden")
    layers, bidirectional = data.draw(st.integers(1, 2), label="layers"), data.draw(st.booleans(), label="bidirectional")
    batch_first = data.draw(st.booleans(), label="batch_first")
    torch.manual_seed(data.draw(st.integers(0, 2**16), label="weight_seed"))
    layer = layer_type(input_size, hidden_size, layers, batch_first=batch_first, bidirectional=bidirectional).eval()
    sequence, batch = data.draw(st.integers(1, 7), label="sequence"), data.draw(st.integers(1, 3), label="batch")
    x = data.draw(tensors((sequence, batch, input_size), distributions=("normal", "outliers"), grid=dtype), label="x")
    verdict = verify(layer, x, op=name, dtype=dtype)
    hypothesis.target(verdict.value, label=f"rel_mse:{name}:{dtype}")
